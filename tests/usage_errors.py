"""One helper for the CLI tests: a user's mistake ends in one line on stderr, with exit code 2, no traceback."""

from __future__ import annotations

from milegpo.cli import main


def one_line_error(capsys, argv: list[str], code: int = 2) -> str:
    """Run ``milegpo argv``; assert it returns ``code`` with one line on stderr and no traceback; that line."""
    assert main(argv) == code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]

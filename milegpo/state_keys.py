"""State keys: the canonical text of an observation, its signed 64-bit key, and the success sink.

One definition for both sides of the rollout: the environments key every observation with
:func:`state_key` (``info["state_key"]``), the credit module reads those keys as
``StepBatch.state`` / ``next_state`` and :data:`SINK` marks a won trajectory's last
next_state. ``milegpo.envs`` and ``milegpo.credit`` re-export these names.

This module imports nothing heavy (no torch): environment pool workers import it at start-up.
"""

from __future__ import annotations

import hashlib
import re

#: the reserved state key of the success sink g (int64 max). State hashes never take it.
SINK: int = (1 << 63) - 1

_WS = re.compile(r"\s+")


def canonical_state(text: str) -> str:
    """The canonical text of an observation: the raw environment feedback, whitespace collapsed.

    As verl-agent's GiGPO anchor observation, the state is the feedback text itself (not
    the prompt, not the history); two observations with the same words are one state.
    """
    return _WS.sub(" ", text).strip()


def state_key(text: str) -> int:
    """Signed 64-bit key of ``canonical_state(text)``: blake2b-64, stable across processes.

    Never returns :data:`SINK` (that value is remapped to ``SINK - 1``), so a state hash
    can never be mistaken for the success sink. Returns a Python int in [-2**63, 2**63 - 2].
    """
    digest = hashlib.blake2b(canonical_state(text).encode("utf-8"), digest_size=8).digest()
    key = int.from_bytes(digest, "little", signed=True)
    return SINK - 1 if key == SINK else key


__all__ = ["SINK", "canonical_state", "state_key"]

"""Action parsing: ``<action>...</action>`` checked against the admissible actions."""

from milegpo.rollout import parse_action


def test_parse_action():
    adm = ["go to cabinet 1", "look"]
    assert parse_action("<think>x</think><action> Go  to cabinet 1 </action>", adm) == ("go to cabinet 1", True, "")
    assert parse_action("<action>look</action> then <action>go to cabinet 1</action>", adm).action == "go to cabinet 1"
    assert parse_action("go to cabinet 1", adm) == ("", False, "no_action")
    assert parse_action("<action>fly</action>", adm) == ("fly", False, "not_admissible")
    assert parse_action("<action>look</action>", adm, require_think=True) == ("look", False, "no_think")
    assert parse_action("<action>look", adm).valid is False  # truncated

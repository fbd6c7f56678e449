"""A module that registers a gymnasium id when it is imported, as a user's package does: ``--env
gym:tests.envs.gym_registered:KeyDoorRegistered-v0`` (gymnasium's ``module:id`` form) imports it first."""

import gymnasium

ID = "KeyDoorRegistered-v0"

if ID not in gymnasium.registry:
    gymnasium.register(id=ID, entry_point="tests.envs.text_games:KeyDoor", disable_env_checker=True)

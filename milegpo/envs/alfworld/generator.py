"""Offline ALFWorld game generator: ALFWorld-format games from the scenes shipped in the alfworld wheel.

The official games (``alfworld-download``) need GitHub. The wheel ships what a game is
made of: the PDDL domain (``alfred.pddl``), the text grammar (``alfred.twl2``), the
receptacles of 120 real AI2-THOR scenes with their interaction poses
(``alfworld/gen/layouts/FloorPlanN-openable.json``), the object types of each scene
(``FloorPlanN-objects.json``), ALFRED's constants (which receptacle holds which object,
which objects can be cleaned/heated/cooled/toggled) and the goal library (goal PDDL and
sentence templates). :func:`generate` places the scene's objects at random (1-3 instances
of each type, by default, in receptacles that can hold them, ALFRED's rule), picks a task of one of
the six task types valid for the room, writes ``initial_state.pddl``, ``traj_data.json``
and ``game.tw-pddl`` in the official tree, and keeps a game only when ALFWorld's own
handcoded expert wins it within ``max_expert_steps`` (its actions become the game's
``walkthrough``; ``solvable: true``). The expert runs with one bug of ALFWorld 0.4.2 fixed
(:func:`patch_expert_move_tracking`: it books placements on "put", the command is "move");
without the fix it wins about 1 pick-two game in 5.

Splits follow ALFRED's scene split: ``train`` and ``valid_seen`` (in-distribution) use the
train scenes (FloorPlan 7-30, 207-230, 307-330, 407-430; disjoint seeds), ``valid_unseen``
(out-of-distribution) the held-out scenes (1-6, 201-206, 301-306, 401-406).

Object ids use ALFRED's mangled form (``Apple_bar__plus_01_dot_20_bar_...``): ALFWorld's
demangler derives the displayed names ("apple 1") from it, and the expert and the
grammar rely on those names.

Differences from the official games: object placement is random, not ALFRED's physically
simulated one (every object type of the scene appears, 1-2 times by default); receptacles that the
layout files do not list with a pose (stove burners, toasters, coffee machines, laundry
hampers) get a synthetic location; no sliced or movable-receptacle tasks (ALFWorld skips
those too); goal sentences come from the templates, not human annotations.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from ..base import TASK_TYPES

#: split name -> (scene numbers, offset making game seeds of the split disjoint)
SPLIT_DIRS = ("train", "valid_seen", "valid_unseen")
_APPLIANCE = {"pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
              "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
              "pick_cool_then_place_in_recep": ("Fridge", "Coolable")}
_EXTRA_RECEPS = ("StoveBurner", "CoffeeMachine", "Toaster", "LaundryHamper", "Cart", "Ottoman")
_NOT_OBJECTS = {"Chair", "Window", "LightSwitch", "StoveKnob", "Faucet", "Blinds", "Mirror", "Curtains", "Painting",
                "Television", "HousePlant", "ShowerDoor", "ShowerHead", "ShowerGlass", "Sink", "Bathtub", "FloorLamp",
                "Poster", "Footstool", "Boots", "ShowerCurtain", "Stool", "RoomDecor", "DogBed", "Desktop", "Floor",
                "TableTopDecor", "Towel", "ScrubBrush", "Plunger", "TeddyBear"}


def _constants():
    import alfworld.gen.constants as C

    return C


def scenes(split: str) -> list[int]:
    """ALFRED's scene numbers of a split (train / valid_seen: train scenes; valid_unseen: test scenes)."""
    C = _constants()
    if split in ("train", "valid_seen"):
        return list(C.TRAIN_SCENE_NUMBERS)
    if split == "valid_unseen":
        return list(C.TEST_SCENE_NUMBERS)
    raise ValueError(f"ALFWorld split must be one of {SPLIT_DIRS}, got {split!r}")


def room_of(scene: int) -> str:
    C = _constants()
    return next(room for room, nums in C.SCENE_TYPE.items() if scene in nums)


def mangle(text: str) -> str:
    """ALFRED's PDDL-safe id: ``Apple|+01.20|-00.50`` -> ``Apple_bar__plus_01_dot_20_bar__minus_00_dot_50``."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        text = text.replace(a, b)
    return text


def _coord(rng: random.Random) -> str:
    return "|".join(f"{rng.uniform(-3, 3):+06.2f}" for _ in range(3))


@dataclass
class _Scene:
    num: int
    room: str
    receps: list  # (raw id, rtype, location)
    object_types: list


def load_scene(num: int, rng: random.Random) -> _Scene:
    """Receptacles (with locations) and object types of FloorPlan``num`` from the wheel's layout files."""
    import alfworld.gen

    C = _constants()
    root = Path(alfworld.gen.__file__).parent / "layouts"
    openable = json.loads((root / f"FloorPlan{num}-openable.json").read_text())
    present = json.loads((root / f"FloorPlan{num}-objects.json").read_text())
    receps, used = [], set()

    def loc_of(pose) -> str:
        x, z, rot, hor = pose
        base = f"loc|{int(round(x / 0.25))}|{int(round(z / 0.25))}|{int(rot) // 90 % 4}|{int(hor)}"
        loc, k = base, 0
        while loc in used:  # one receptacle per location keeps "go to X" unambiguous
            k += 1
            loc = f"{base}{k}"
        used.add(loc)
        return loc

    for rid, pose in sorted(openable.items()):
        rtype = rid.split("|")[0]
        if rtype in ("Sink", "Bathtub"):
            rid, rtype = f"{rid}|{rtype}Basin", f"{rtype}Basin"
        if rtype not in C.VAL_RECEPTACLE_OBJECTS:
            continue
        receps.append((rid, rtype, loc_of(pose)))
    have = {r[1] for r in receps}
    for rtype in _EXTRA_RECEPS:
        if rtype in present and rtype not in have and rtype in C.VAL_RECEPTACLE_OBJECTS:
            for _ in range(rng.randint(2, 4) if rtype == "StoveBurner" else 1):
                receps.append((f"{rtype}|{_coord(rng)}", rtype, loc_of((rng.uniform(-3, 3), rng.uniform(-3, 3), 0, 30))))
    receptacle_types = set(C.RECEPTACLES) | {"Sink", "Bathtub"}
    otypes = sorted(t for t in present if t not in receptacle_types - set(C.MOVABLE_RECEPTACLES)
                    and t not in _NOT_OBJECTS and t in C.OBJECTS)
    return _Scene(num, room_of(num), receps, otypes)


def _holders(C, scene: _Scene, otype: str) -> list:
    return [r for r in scene.receps if otype in C.VAL_RECEPTACLE_OBJECTS.get(r[1], ())]


def _pick_task(C, rng: random.Random, scene: _Scene, task_type: str):
    """(object_target, parent_target, toggle_target) for ``task_type`` in ``scene``, or None."""
    if scene.room not in C.GOALS_VALID[task_type]:
        return None
    rtypes = {r[1] for r in scene.receps}
    cands = [t for t in scene.object_types if t != "DeskLamp" and _holders(C, scene, t)]
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in scene.object_types:
            return None
        lamp_at = [r for r in scene.receps if r[1] in ("Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable")]
        if not lamp_at or not cands:
            return None
        return rng.choice(cands), "", "DeskLamp"
    need = _APPLIANCE.get(task_type)
    if need:
        if need[0] not in rtypes:
            return None
        cands = [t for t in cands if t in C.VAL_ACTION_OBJECTS[need[1]]]
    rng.shuffle(cands)
    for x in cands:
        ys = sorted({r[1] for r in _holders(C, scene, x)} - ({need[0]} if need else set()))
        if ys:
            return x, rng.choice(ys), ""
    return None


def make_problem(rng: random.Random, scene: _Scene, task_type: str, x: str, y: str, toggle: str, name: str,
                 max_instances: int = 2) -> str:
    """The PDDL problem text of one game (ALFRED's ``initial_state.pddl`` layout).

    Every object type of the scene gets 1..max_instances instances (the target 2..3 in pick-two
    tasks); fewer objects make the engine faster (its step grounds every applicable action).
    """
    import alfworld.gen.goal_library as glib

    C = _constants()
    objects, init = [], []
    # every object type of the scene, none of X already in Y
    placed: list = []  # (raw id, otype, recep)
    for otype in scene.object_types:
        if otype == "DeskLamp":
            continue
        n = rng.randint(2, 3) if (otype == x and task_type == "pick_two_obj_and_place") else rng.randint(1, max_instances)
        holders = _holders(C, scene, otype)
        if otype == x and y:
            holders = [r for r in holders if r[1] != y] or holders
        if not holders:
            continue
        for _ in range(n):
            placed.append((f"{otype}|{_coord(rng)}", otype, rng.choice(holders)))
    if toggle:
        stands = [r for r in scene.receps if r[1] in ("Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable")]
        placed.append((f"DeskLamp|{_coord(rng)}", "DeskLamp", rng.choice(stands)))
    start = f"loc|{rng.randint(-12, 12)}|{rng.randint(-12, 12)}|{rng.randint(0, 3)}|30|start"
    otypes = sorted({p[1] for p in placed} | ({x} if x else set()))
    rtypes = sorted({r[1] for r in scene.receps} | ({y} if y else set()))
    locs = sorted({r[2] for r in scene.receps} | {start})
    for rid, rtype, loc in scene.receps:
        m = mangle(rid)
        objects.append(f"{m} - receptacle")
        init.append(f"(receptacleType {m} {rtype}Type)")
        init.append(f"(receptacleAtLocation {m} {mangle(loc)})")
        if rtype in C.OPENABLE_CLASS_SET:
            init.append(f"(openable {m})")
    for oid, otype, (rid, _, loc) in placed:
        m = mangle(oid)
        objects.append(f"{m} - object")
        init += [f"(objectType {m} {otype}Type)", f"(objectAtLocation {m} {mangle(loc)})",
                 f"(inReceptacle {m} {mangle(rid)})"]
        if otype in C.VAL_ACTION_OBJECTS["Toggleable"]:
            init.append(f"(toggleable {m})")
        else:
            init.append(f"(pickupable {m})")
        for prop, key in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"),
                          ("sliceable", "Sliceable")):
            if otype in C.VAL_ACTION_OBJECTS[key]:
                init.append(f"({prop} {m})")
        if otype in C.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {m})")
    for rt in rtypes:
        for ot in otypes:
            if ot in C.VAL_RECEPTACLE_OBJECTS.get(rt, ()):
                init.append(f"(canContain {rt}Type {ot}Type)")
    init.append(f"(atLocation agent1 {mangle(start)})")
    goal = glib.gdict[task_type]["pddl"].format(obj=x, recep=y, toggle=toggle)
    goal = mangle(goal.replace("-", "#")).replace("#", "-")  # goal_library writes '#' for PDDL's '-'
    lines = [f"(define (problem plan_{mangle(name)})", "(:domain alfred)", "(:objects", "agent1 - agent"]
    lines += objects
    lines += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    lines += [f"{mangle(loc)} - location" for loc in locs]
    lines += [")", "(:init"] + init + [")"]
    return "\n".join(lines) + "\n" + goal.strip() + "\n"


def _goal_text(rng: random.Random, task_type: str, x: str, y: str, toggle: str) -> str:
    import alfworld.gen.goal_library as glib

    template = rng.choice(glib.gdict[task_type]["templates"])
    return template.format(obj=x.lower(), recep=y.lower(), toggle=toggle.lower(), mrecep="")


def patch_expert_move_tracking(env) -> None:
    """Fix ALFWorld 0.4.2's handcoded expert: it books a placed object on ``"put" in last_action``,
    but the TextWorld command is ``move X to Y``, so after its first placement it believes it still
    holds the object (pick-two tasks then loop). Call after each ``reset`` of an AlfredExpert wrapper."""
    agent = getattr(env, "_handcoded_expert", None)
    policy = getattr(agent, "policy", None)
    if policy is None or getattr(policy, "_milegpo_move_fix", False):
        return
    original = policy.update_state_tracking

    def update_state_tracking(game_state, last_action):
        if last_action.startswith("move "):
            last_action = "put " + last_action[len("move "):]
        return original(game_state, last_action)

    policy.update_state_tracking = update_state_tracking
    policy._milegpo_move_fix = True


def solve_with_expert(game_file: str, max_steps: int = 50, fix_move_tracking: bool = True) -> list[str] | None:
    """ALFWorld's handcoded expert on ``game_file``: its winning actions, or None if it fails in ``max_steps``.

    fix_move_tracking: apply :func:`patch_expert_move_tracking` (the expert's "move"/"put" bug).
    """
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredExpertType, AlfredInfos
    from textworld.envs import PddlEnv

    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"]))
    env = AlfredExpert(AlfredInfos(AlfredDemangler(env, shuffle=False)), expert_type=AlfredExpertType.HANDCODED)
    try:
        env.load(game_file)
        gs = env.reset()
        if fix_move_tracking:
            patch_expert_move_tracking(env)
        actions = []
        for _ in range(max_steps):
            a = gs["extra.expert_plan"][0]
            gs, _, done = env.step(a)
            actions.append(a)
            if gs["won"]:
                return actions
        return None
    except Exception:  # noqa: BLE001 - an expert crash means "not solvable by the expert"
        return None
    finally:
        env.close()


def generate(out_dir: str | os.PathLike, n: int, seed: int = 0, split: str = "train",
             task_types: tuple[str, ...] | list[str] | None = None, max_expert_steps: int = 50,
             max_attempts: int | None = None, max_instances: int = 2, verbose: bool = False) -> list[Path]:
    """Write ``n`` solvable ALFWorld games of ``split`` under ``out_dir/json_2.1.1/<split>/``.

    split: "train", "valid_seen" (ID) or "valid_unseen" (OOD); seed: games of (split, seed) are
    reproducible, and splits never share a game; task_types: restrict (default: all six; each
    attempt draws a type uniformly, then a scene of a room where ALFRED allows it); max_expert_steps: a game is kept only if
    ALFWorld's handcoded expert wins it within that many steps; max_instances: copies of each
    distractor object type (ALFRED uses up to 3; 2 keeps the engine faster). Returns the
    ``game.tw-pddl`` paths.
    Layout: ``json_2.1.1/<split>/<task_type>-<Obj>-None-<Recep>-<scene>/trial_<split>_<seed>_<i>/``
    holding ``initial_state.pddl``, ``traj_data.json``, ``game.tw-pddl`` (AlfredTWEnv loads it).
    """
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    C = _constants()
    types = tuple(task_types or TASK_TYPES)
    for t in types:
        if t not in TASK_TYPES:
            raise ValueError(f"task type {t!r} is not one of {TASK_TYPES}")
    scene_nums = scenes(split)
    domain, grammar = Path(ALFRED_PDDL_PATH).read_text(), Path(ALFRED_TWL2_PATH).read_text()
    rng = random.Random(f"alfworld-gen/{split}/{seed}")
    root = Path(out_dir) / "json_2.1.1" / split
    out: list[Path] = []
    attempts, limit = 0, max_attempts or 20 * n + 50
    while len(out) < n:
        attempts += 1
        if attempts > limit:
            raise RuntimeError(f"alfworld.generate: only {len(out)}/{n} solvable games after {limit} attempts "
                               f"(split={split!r}, task_types={types})")
        # task type first (uniform), then a scene of a room where ALFRED allows it and that holds it
        task_type = rng.choice(types)
        valid = [s for s in scene_nums if room_of(s) in C.GOALS_VALID[task_type]]
        picked = None
        for _ in range(50):
            scene = load_scene(rng.choice(valid), rng)
            picked = _pick_task(C, rng, scene, task_type)
            if picked is not None:
                break
        if picked is None:
            continue
        x, y, toggle = picked
        trial = f"trial_{split}_{seed}_{len(out):05d}"
        folder = root / f"{task_type}-{x}-None-{y or 'None'}-{scene.num}" / trial
        folder.mkdir(parents=True, exist_ok=True)
        problem = make_problem(rng, scene, task_type, x, y, toggle, trial, max_instances)
        desc = _goal_text(rng, task_type, x, y, toggle)
        traj = {"task_id": trial, "task_type": task_type,
                "pddl_params": {"object_target": x, "parent_target": y, "toggle_target": toggle, "mrecep_target": "",
                                "object_sliced": False},
                "scene": {"scene_num": scene.num, "floor_plan": f"FloorPlan{scene.num}", "random_seed": seed},
                "turk_annotations": {"anns": [{"task_desc": desc, "high_descs": [], "assignment_id": "generated"}]},
                "generator": "milegpo.envs.alfworld.generator"}
        (folder / "initial_state.pddl").write_text(problem)
        (folder / "traj_data.json").write_text(json.dumps(traj, indent=1))
        game = {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", desc), "pddl_problem": problem,
                "solvable": None, "walkthrough": None}
        gpath = folder / "game.tw-pddl"
        gpath.write_text(json.dumps(game))
        t0 = time.perf_counter()
        walk = solve_with_expert(str(gpath), max_expert_steps)
        if walk is None:
            if verbose:
                print(f"unsolved ({time.perf_counter() - t0:.1f}s): {folder}")
            for f in folder.iterdir():
                f.unlink()
            folder.rmdir()
            try:
                folder.parent.rmdir()
            except OSError:
                pass
            continue
        game["solvable"], game["walkthrough"] = True, walk
        gpath.write_text(json.dumps(game))
        if verbose:
            print(f"solved in {len(walk)} steps ({time.perf_counter() - t0:.1f}s): {folder}")
        out.append(gpath)
    return out


__all__ = ["generate", "make_problem", "load_scene", "scenes", "solve_with_expert", "patch_expert_move_tracking", "mangle", "TASK_TYPES",
           "SPLIT_DIRS"]

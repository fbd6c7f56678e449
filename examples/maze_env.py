"""A tool-calling maze, written the way TRL's docs write an ``environment_factory`` environment.

The same class trains with ``trl.GRPOTrainer(..., environment_factory=MazeEnv)`` and with
``milegpo.trainer.MileGPOTrainer(..., environment_factory=MazeEnv)``:

- ``reset(**row)`` starts an episode from a dataset row (its ``seed`` column picks the maze) and returns
  the text appended to the row's prompt;
- the public methods ``move`` and ``look`` are the tools; their docstrings are the tools' schema;
- ``get_reward()`` scores the episode: 1.0 when the agent reached the exit, else 0.0.

The maze is a 3 x 3 grid of rooms (rows a, b, c; columns 1, 2, 3) whose doors form a random spanning tree
(a "perfect" maze: one path between any two rooms), drawn from the row's seed. The agent starts in room
a1 and must reach room c3, then answer (a turn without a tool call ends the episode).
"""

from __future__ import annotations

import random

SIZE = 3
ROWS = "abc"
DIRECTIONS = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}
START, EXIT = (0, 0), (SIZE - 1, SIZE - 1)


def room_name(cell: tuple[int, int]) -> str:
    return f"{ROWS[cell[0]]}{cell[1] + 1}"


def make_maze(seed: int) -> dict[tuple[int, int], set[str]]:
    """The doors of each room of maze ``seed``: a depth-first spanning tree of the grid."""
    rng = random.Random(seed)
    doors: dict[tuple[int, int], set[str]] = {(r, c): set() for r in range(SIZE) for c in range(SIZE)}
    seen, stack = {START}, [START]
    while stack:
        cell = stack[-1]
        options = [(d, (cell[0] + dr, cell[1] + dc)) for d, (dr, dc) in DIRECTIONS.items()
                   if (cell[0] + dr, cell[1] + dc) in doors and (cell[0] + dr, cell[1] + dc) not in seen]
        if not options:
            stack.pop()
            continue
        direction, nxt = rng.choice(options)
        back = {"north": "south", "south": "north", "east": "west", "west": "east"}[direction]
        doors[cell].add(direction)
        doors[nxt].add(back)
        seen.add(nxt)
        stack.append(nxt)
    return doors


class MazeEnv:
    """Find the exit of a small maze by moving from room to room."""

    def __init__(self):
        self.doors: dict[tuple[int, int], set[str]] = {}
        self.position = START
        self.escaped = False

    def reset(self, seed: int = 0, **kwargs) -> str:
        self.doors = make_maze(int(seed))
        self.position = START
        self.escaped = False
        return f" You are in room {room_name(self.position)}. {self._exits()}"

    def _exits(self) -> str:
        return "Doors: " + " ".join(d for d in DIRECTIONS if d in self.doors[self.position]) + "."

    def move(self, direction: str) -> str:
        """
        Walk through a door of the current room.

        Args:
            direction: The door to walk through: north, south, east or west.

        Returns:
            The room you reach and its doors.
        """
        if self.escaped:
            return "You have escaped. Answer to finish."
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown direction {direction!r}; use north, south, east or west")
        if direction not in self.doors[self.position]:
            return f"There is no door {direction}. You are in room {room_name(self.position)}. {self._exits()}"
        dr, dc = DIRECTIONS[direction]
        self.position = (self.position[0] + dr, self.position[1] + dc)
        if self.position == EXIT:
            self.escaped = True
            return f"You are in room {room_name(self.position)}. This is the exit! Answer to finish."
        return f"You are in room {room_name(self.position)}. {self._exits()}"

    def look(self) -> str:
        """
        Look around the current room.

        Returns:
            The room you are in and its doors.
        """
        if self.escaped:
            return "You have escaped. Answer to finish."
        return f"You are in room {room_name(self.position)}. {self._exits()}"

    def get_reward(self) -> float:
        return 1.0 if self.escaped else 0.0


def expert_direction(env: MazeEnv) -> str | None:
    """The first move of the shortest path from the agent's room to the exit (None once escaped)."""
    if env.escaped:
        return None
    start = env.position
    parents = {start: None}
    queue = [start]
    while queue:
        cell = queue.pop(0)
        if cell == EXIT:
            break
        for d in sorted(env.doors[cell]):
            dr, dc = DIRECTIONS[d]
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in parents:
                parents[nxt] = (cell, d)
                queue.append(nxt)
    cell, first = EXIT, None
    while parents[cell] is not None:
        cell, first = parents[cell]
    return first

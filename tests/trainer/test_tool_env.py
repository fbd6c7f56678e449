"""TRL's environment_factory protocol with step credit: milegpo.rollout.tools and
MileGPOTrainer(..., environment_factory=...), on the maze of examples/maze_env.py."""

import ast
import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest
import torch

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, os.path.abspath(EXAMPLES))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from maze_env import MazeEnv, expert_direction  # noqa: E402
from train_maze import ANSWER, call_text, dataset, expert_policy, make_config, maze_tokenizer  # noqa: E402

from milegpo.credit import SINK  # noqa: E402
from milegpo.job.policy import make_model  # noqa: E402
from milegpo.rollout.tool_protocol import (EnvironmentProtocolError, default_tool_state,  # noqa: E402
                                           environment_tools)
from milegpo.rollout.tools import ToolEpisodeRunner  # noqa: E402
from milegpo.trl_seam import tool_suffix_ids  # noqa: E402
from milegpo.state_keys import state_key  # noqa: E402

torch.set_num_threads(1)

UNKNOWN_TOOL = call_text("fly", {})
BAD_ARGUMENT = call_text("move", {"direction": "up"})
MALFORMED = '<tool_call>{"name" oops</tool_call>'


@pytest.fixture(scope="module")
def tok():
    tok = maze_tokenizer()
    tok.add_tokens([UNKNOWN_TOOL, BAD_ARGUMENT, MALFORMED])
    return tok


def scripted(tok, texts_per_turn):
    """generate() answering turn t of every episode with texts_per_turn[t] (then ANSWER)."""
    def generate(prompt_ids, environments):
        out = []
        for env in environments:
            turn = getattr(env, "_turns", 0)
            env._turns = turn + 1
            text = texts_per_turn[turn] if turn < len(texts_per_turn) else ANSWER
            out.append(tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
        return out, None
    return generate


# ---------------------------------------------------------------------------------------------- the protocol
def test_expert_episodes_follow_trl_protocol(tok):
    """A scripted expert wins every maze; each turn is one row; row t+1's prompt is row t's prompt + the turn's
    tokens + the tool messages' tokens (nothing re-tokenized), and equals the chat template of the conversation
    so far with the tools' schema: what GRPOTrainer shows the model."""
    runner = ToolEpisodeRunner(MazeEnv, tok, horizon=12, tool_timeout=None)
    rows = list(dataset(range(3)))
    rollout = runner.run(rows, 2, expert_policy(tok))
    assert [e.won for e in rollout.episodes] == [True] * 6
    assert len(rollout.rows) == sum(e.length for e in rollout.episodes)
    assert rollout.tool_calls == len(rollout.rows) - 6 and rollout.tool_failures == 0
    env = MazeEnv()
    tools = environment_tools(env)
    for traj in range(6):
        steps = sorted((r for r in rollout.rows if r.traj == traj), key=lambda r: r.t)
        assert steps[-1].action == "<answer>" and steps[-1].reward == 1.0 and steps[-1].next_state == SINK
        assert all(r.reward == 0.0 for r in steps[:-1]) and all(r.success for r in steps)
        # replay the conversation and render it with the chat template
        messages = [{"role": "user", "content": "Find the exit of the maze: room c3." + env.reset(seed=traj // 2)}]
        for r, nxt in zip(steps, steps[1:]):
            expected = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                               return_dict=True)["input_ids"]
            assert r.prompt_ids == list(expected)
            direction = expert_direction(env)
            observation = env.move(direction)
            call = {"type": "function", "function": {"name": "move", "arguments": {"direction": direction}}}
            tool_msg = {"role": "tool", "name": "move", "content": observation}
            messages += [{"role": "assistant", "content": "", "tool_calls": [call]}, tool_msg]
            suffix = tool_suffix_ids(tok, [tool_msg])
            assert nxt.prompt_ids == r.prompt_ids + r.completion_ids + suffix
            assert tok.convert_tokens_to_ids("<|tool|>") in suffix  # the tool result is in the next prompt...
            assert tok.convert_tokens_to_ids("<|tool|>") not in r.completion_ids  # ...never in a completion
            assert r.next_state == nxt.state == state_key(default_tool_state(messages))


def test_tool_suffix_is_grpo_trainers(tok):
    """tool_suffix_ids runs GRPOTrainer._get_tool_suffix_ids for a text tokenizer (and so equals it)."""
    from trl import GRPOTrainer

    fake = SimpleNamespace(processing_class=tok, _tokenizer=tok, chat_template=None, chat_template_kwargs={},
                           _is_vlm=False)
    messages = [{"role": "tool", "name": "move", "content": "You are in room b1. Doors: north south."},
                {"role": "tool", "name": "look", "content": "You are in room b1."}]
    assert tool_suffix_ids(tok, messages) == list(GRPOTrainer._get_tool_suffix_ids(fake, messages))


def test_states_group_and_hooks(tok):
    """Default keys: turn 0 is the prompt's last message (one state per group), later ones the tool results with
    the tools' names; an environment's _state_anchor (never a tool) and a state_anchor callable replace them."""
    rows = list(dataset([5, 6]))
    rollout = ToolEpisodeRunner(MazeEnv, tok, horizon=12, tool_timeout=None).run(rows, 3, expert_policy(tok))
    first = {(r.group, r.state) for r in rollout.rows if r.t == 0}
    assert len(first) == 2
    assert default_tool_state([{"role": "tool", "name": "look", "content": "x"}]) != default_tool_state(
        [{"role": "tool", "name": "move", "content": "x"}])

    class HookedMaze(MazeEnv):
        def _state_anchor(self, conversation):
            return f"room {self.position}"

    assert "_state_anchor" not in [t.__name__ for t in environment_tools(HookedMaze())]
    hooked = ToolEpisodeRunner(HookedMaze, tok, horizon=12, tool_timeout=None).run(rows, 1, expert_policy(tok))
    assert {r.state for r in hooked.rows} <= {state_key(f"room {(i, j)}") for i in range(3) for j in range(3)}
    seen = []

    def anchor(env, conversation):
        seen.append((type(env), conversation[-1]["role"]))
        return "one state"

    mine = ToolEpisodeRunner(HookedMaze, tok, horizon=12, tool_timeout=None, state_anchor=anchor)
    out = mine.run(rows, 1, expert_policy(tok))
    assert {r.state for r in out.rows} == {state_key("one state")}
    assert seen[:2] == [(HookedMaze, "user")] * 2 and {role for _, role in seen[2:]} == {"tool"}


# ---------------------------------------------------------------------------------------------- invalid steps
def test_invalid_tool_calls_are_invalid_steps(tok):
    """A call naming no tool, one that does not parse and one whose tool raises are invalid steps with TRL's error
    text as the observation; the episode goes on and ends with the answer."""
    runner = ToolEpisodeRunner(MazeEnv, tok, horizon=8, tool_timeout=5.0)
    rollout = runner.run(list(dataset([1])), 1, scripted(tok, [UNKNOWN_TOOL, MALFORMED, BAD_ARGUMENT]))
    steps = sorted(rollout.rows, key=lambda r: r.t)
    assert [r.invalid for r in steps] == [True, True, True, False]
    assert rollout.episodes[0].invalid_steps == 3 and rollout.tool_failures == 3 and not rollout.episodes[0].won
    shown = [m["content"] for m in rollout.conversations[0] if m["role"] == "tool"]
    assert shown[0] == str({"error": "Tool fly not found."})
    assert shown[1].startswith("{'error': 'the tool call could not be parsed")
    assert shown[2] == str({"error": "unknown direction 'up'; use north, south, east or west"})
    assert rollout.conversations[0][-1] == {"role": "assistant", "content": ANSWER}
    assert steps[-1].next_state != SINK


class HangingMaze(MazeEnv):
    def wait(self) -> str:
        """
        Wait a while.

        Returns:
            Nothing.
        """
        time.sleep(3.0)
        return "waited"


def test_hanging_tool_truncates_the_episode(tok):
    tok2 = maze_tokenizer()
    tok2.add_tokens([call_text("wait", {})])
    runner = ToolEpisodeRunner(HangingMaze, tok2, horizon=8, tool_timeout=0.2)
    t0 = time.perf_counter()
    rollout = runner.run(list(dataset([1])), 1, scripted(tok2, [call_text("wait", {})]))
    assert time.perf_counter() - t0 < 2.5
    episode = rollout.episodes[0]
    assert episode.truncated and not episode.won and "timed out after 0.2 s" in episode.error
    assert len(rollout.rows) == 1 and rollout.tool_timeouts == 1


class MilestoneMaze(MazeEnv):
    """Counts the rooms reached other than the start: its verifiable subgoals (issue 47)."""

    def reset(self, seed: int = 0, **kwargs) -> str:
        text = super().reset(seed=seed, **kwargs)
        self.visited = {self.position}
        return text

    def move(self, direction: str) -> str:
        text = super().move(direction)
        self.visited.add(self.position)
        return text

    def _milestones(self) -> int:
        return len(self.visited) - 1


def test_an_environments_subgoal_count_marks_milestone_turns(tok):
    """_milestones() is read after reset and every turn: a turn whose count rose is a milestone row (every move of
    the expert reaches a new room; its answer does not); an environment without it has none; the hook is no
    tool; a count that falls or is no int is refused naming the class."""
    from milegpo.rollout.tool_protocol import EnvironmentProtocolError, milestone_count

    assert "_milestones" not in [t.__name__ for t in environment_tools(MilestoneMaze())]
    rollout = ToolEpisodeRunner(MilestoneMaze, tok, horizon=12, tool_timeout=None).run(
        list(dataset([3, 4])), 2, expert_policy(tok))
    for traj in range(4):
        steps = sorted((r for r in rollout.rows if r.traj == traj), key=lambda r: r.t)
        assert [r.milestone for r in steps] == [True] * (len(steps) - 1) + [False]
    assert rollout.step_batch().milestone.sum() == len(rollout.rows) - 4
    # a turn that walks into a wall (no new room) is no milestone
    walled = ToolEpisodeRunner(MilestoneMaze, tok, horizon=8, tool_timeout=None).run(
        list(dataset([1])), 1, scripted(tok, [BAD_ARGUMENT]))
    assert [r.milestone for r in sorted(walled.rows, key=lambda r: r.t)] == [False, False]
    plain = ToolEpisodeRunner(MazeEnv, tok, horizon=12, tool_timeout=None).run(list(dataset([3])), 1,
                                                                               expert_policy(tok))
    assert not any(r.milestone for r in plain.rows) and milestone_count(MazeEnv()) is None

    class Falling(MilestoneMaze):
        def _milestones(self) -> int:
            return 5 - len(self.visited)

    class Texty(MilestoneMaze):
        def _milestones(self):
            return "1"

    with pytest.raises(EnvironmentProtocolError, match=r"Falling: _milestones\(\) fell from 4 to 3"):
        ToolEpisodeRunner(Falling, tok, horizon=12, tool_timeout=None).run(list(dataset([3])), 1, expert_policy(tok))
    with pytest.raises(EnvironmentProtocolError, match=r"Texty: _milestones\(\) returned '1'; expected an int"):
        ToolEpisodeRunner(Texty, tok, horizon=12, tool_timeout=None).run(list(dataset([3])), 1, expert_policy(tok))


class Unprintable:
    def __str__(self):
        raise RuntimeError("no text for you")


class HostileMaze(MazeEnv):
    """Tools whose results or errors break what comes after the call: str(), the tokenizer, the process."""

    def big(self) -> str:
        """
        A number past Python's int-to-str limit.

        Returns:
            A number.
        """
        return 10 ** 5000

    def opaque(self) -> str:
        """
        A result whose str() raises.

        Returns:
            An object.
        """
        return Unprintable()

    def garbled(self) -> str:
        """
        Text with a lone surrogate.

        Returns:
            Text.
        """
        return "room \udc80"

    def complain(self) -> str:
        """
        Raise with a lone surrogate in the message.

        Returns:
            Nothing.
        """
        raise ValueError("bad \udc80")

    def leave(self) -> str:
        """
        Exit the process.

        Returns:
            Nothing.
        """
        sys.exit(3)


HOSTILE = ["big", "opaque", "garbled", "complain", "leave"]


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_tool_results_that_break_what_follows_are_invalid_steps(timeout):
    """A result past the int-to-str limit, one whose str() raises, text or an error message with a lone surrogate
    (the tokenizer cannot take it), a tool that calls sys.exit: each is an invalid step whose observation names the
    tool; the episode goes on to its answer, the process lives."""
    tok = maze_tokenizer()
    tok.add_tokens([call_text(name, {}) for name in HOSTILE])
    runner = ToolEpisodeRunner(HostileMaze, tok, horizon=8, tool_timeout=timeout)
    rollout = runner.run(list(dataset([1])), 1, scripted(tok, [call_text(name, {}) for name in HOSTILE]))
    steps = sorted(rollout.rows, key=lambda r: r.t)
    assert [r.invalid for r in steps] == [True] * 5 + [False]
    assert rollout.tool_failures == 5 and rollout.episodes[0].invalid_steps == 5
    shown = [m["content"] for m in rollout.conversations[0] if m["role"] == "tool"]
    assert all(text.encode("utf-8") for text in shown)  # every observation reaches the tokenizer
    errors = [ast.literal_eval(text)["error"] for text in shown]
    assert errors[0].startswith("the result of tool big (int) could not be made a string: ValueError: Exceeds the "
                                "limit")
    assert errors[1] == ("the result of tool opaque (Unprintable) could not be made a string: RuntimeError: no text "
                         "for you")
    assert errors[2] == ("tool garbled returned text that is not valid UTF-8 (a lone surrogate '\\udc80' at position "
                         "5); the tokenizer cannot take it")
    assert errors[3] == "bad \\udc80"  # the error's own text, the surrogate escaped
    assert errors[4] == "tool leave called sys.exit(3)"


class SurrogateReset(MazeEnv):
    def reset(self, seed: int = 0, **row):
        return super().reset(seed=seed) + " \ud800"


def test_a_lone_surrogate_from_reset_names_reset(tok):
    with pytest.raises(EnvironmentProtocolError, match=r"SurrogateReset.reset returned text that is not valid UTF-8 "
                                                       r"\(a lone surrogate '\\ud800' at position \d+\)"):
        ToolEpisodeRunner(SurrogateReset, tok, tool_timeout=None).run(list(dataset([2])), 1, expert_policy(tok))


def test_a_raising_get_reward_names_it(tok):
    from milegpo.usage import RunError

    class Broken(MazeEnv):
        def get_reward(self):
            raise KeyError("gone")

    with pytest.raises(RunError, match=r"Broken.get_reward\(\) raised KeyError: 'gone'"):
        ToolEpisodeRunner(Broken, tok, tool_timeout=None).run(list(dataset([2])), 1, expert_policy(tok))


def test_a_hung_tool_is_never_a_win(tok):
    """With success_threshold 0 an unscored (reward 0) episode cut by a hung tool was recorded as won."""
    tok2 = maze_tokenizer()
    tok2.add_tokens([call_text("wait", {})])
    runner = ToolEpisodeRunner(HangingMaze, tok2, horizon=8, tool_timeout=0.2, success_threshold=0.0)
    episode = runner.run(list(dataset([1])), 1, scripted(tok2, [call_text("wait", {})])).episodes[0]
    assert episode.truncated and not episode.won and episode.reward == 0.0


def test_hung_tools_of_a_turn_wait_together():
    """The calls of different episodes run at the same time: three tools that each wait for the other two (a
    barrier) all get past it, then hang and time out; run one after another, none would get past it (the first
    waits alone until the barrier breaks, an error before the timeout)."""
    barrier = threading.Barrier(3, timeout=3.0)

    class Gathering(MazeEnv):
        def gather(self) -> str:
            """
            Meet the others, then wait.

            Returns:
                Nothing.
            """
            barrier.wait()
            time.sleep(10.0)
            return "done"

    tok = maze_tokenizer()
    tok.add_tokens([call_text("gather", {})])
    runner = ToolEpisodeRunner(Gathering, tok, horizon=8, tool_timeout=4.0)
    rollout = runner.run(list(dataset([1, 2, 3])), 1, scripted(tok, [call_text("gather", {})]))
    assert rollout.tool_timeouts == 3 and rollout.tool_failures == 3
    assert all(e.truncated and not e.won and "timed out after 4 s" in e.error for e in rollout.episodes)


# ---------------------------------------------------------------------------------------------- bad input
class NoReset:
    def move(self, direction: str) -> str:
        """
        Move.

        Args:
            direction: where.
        """
        return direction


class IntReset(MazeEnv):
    def reset(self, **row):
        return 7


class PickyMaze(MazeEnv):
    def reset(self, seed: int = 0, **row):
        if seed == 13:
            raise KeyError("no maze 13")
        return super().reset(seed=seed)


def reward_env(value):
    class Rewarded(MazeEnv):
        def get_reward(self):
            return value
    return Rewarded


def test_bad_environments_are_refused_where_they_enter(tok):
    with pytest.raises(EnvironmentProtocolError, match="NoReset: reset is missing"):
        ToolEpisodeRunner(NoReset, tok)
    with pytest.raises(EnvironmentProtocolError, match=r"IntReset.reset returned int 7 for dataset row .*'seed': 2"):
        ToolEpisodeRunner(IntReset, tok).run(list(dataset([2])), 1, expert_policy(tok))
    with pytest.raises(ValueError, match=r"PickyMaze.reset rejected dataset row .*'seed': 13.*no maze 13"):
        ToolEpisodeRunner(PickyMaze, tok).run(list(dataset([12, 13])), 1, expert_policy(tok))
    for value, shown in ((float("nan"), "nan"), (None, "None"), ("1.0", "'1.0' \\(str\\)")):
        with pytest.raises(EnvironmentProtocolError, match=f"get_reward\\(\\) returned {shown}"):
            ToolEpisodeRunner(reward_env(value), tok, tool_timeout=None).run(list(dataset([2])), 1,
                                                                               expert_policy(tok))
    with pytest.raises(ValueError, match="'prompt' must be a conversation"):
        ToolEpisodeRunner(MazeEnv, tok).run([{"prompt": "text", "seed": 1}], 1, expert_policy(tok))


def test_trainer_refuses_bad_input_before_loading(tmp_path, tok):
    from milegpo.trainer import MileGPOTrainer

    args = make_config(str(tmp_path), 0, "milegpo", 1, groups_per_iteration=2, group_size=2)
    with pytest.raises(EnvironmentProtocolError, match="reset is missing"):
        MileGPOTrainer(None, args=args, processing_class=tok, train_dataset=dataset(range(4)),
                       environment_factory=NoReset)
    with pytest.raises(ValueError, match="train_dataset has 1 rows, fewer than groups_per_iteration"):
        MileGPOTrainer(None, args=args, processing_class=tok, train_dataset=dataset([0]), environment_factory=MazeEnv)
    with pytest.raises(ValueError, match="train_tasks, pool belong to the built-in worlds"):
        MileGPOTrainer(None, args=args, processing_class=tok, train_tasks=[], pool=object(),
                       train_dataset=dataset(range(4)), environment_factory=MazeEnv)
    with pytest.raises(TypeError, match="a dict of environments"):
        MileGPOTrainer(None, args=args, processing_class=tok, train_dataset=dataset(range(4)),
                       environment_factory={"maze": MazeEnv})

    class AsyncMaze(MazeEnv):
        async def wait(self) -> str:
            """Wait."""
            return ""

    with pytest.raises(EnvironmentProtocolError, match=r"async tools \['wait'\]"):
        MileGPOTrainer(None, args=args, processing_class=tok, train_dataset=dataset(range(4)),
                       environment_factory=AsyncMaze)
    anchored = make_config(str(tmp_path), 0, "milegpo", 1, groups_per_iteration=2, state_anchor="observation")
    with pytest.raises(ValueError, match="state_anchor 'observation' keys a TextEnv's observations"):
        MileGPOTrainer(None, args=anchored, processing_class=tok, train_dataset=dataset(range(4)),
                       environment_factory=MazeEnv)
    from milegpo.trainer.config import ConfigError

    with pytest.raises(ConfigError, match="tool_timeout"):
        make_config(str(tmp_path), 0, "milegpo", 1, tool_timeout=0)
    with pytest.raises(ConfigError, match="success_threshold"):
        make_config(str(tmp_path), 0, "milegpo", 1, success_threshold=float("nan"))


# ---------------------------------------------------------------------------------------------- the trainer
def make_trainer(tmp_path, tok, method="milegpo", **overrides):
    from milegpo.trainer import MileGPOTrainer

    class Recording(MileGPOTrainer):
        def play_iteration(self, inputs):
            out = super().play_iteration(inputs)
            self.records = getattr(self, "records", []) + [{**self.last_iteration, "micro_steps": out["micro_steps"]}]
            return out

    settings = dict(groups_per_iteration=2, group_size=3, horizon=5, per_device_train_batch_size=64)
    settings.update(overrides)
    args = make_config(str(tmp_path), 0, method, 1, **settings)
    model = make_model(tok, hidden=32, layers=1, seed=0)
    return Recording(model, args=args, processing_class=tok, train_dataset=dataset(range(4)),
                     eval_dataset={"heldout": dataset([100, 101])}, environment_factory=MazeEnv)


def room_anchor(env, conversation):
    """A state_anchor for MileGPOConfig(state_anchor="test_tool_env.room_anchor"): the agent's room."""
    return f"room {env.position}"


def test_config_state_anchor_reaches_the_runner(tmp_path, tok):
    trainer = make_trainer(tmp_path, tok, state_anchor="test_tool_env.room_anchor")
    rollout = trainer.play(list(dataset([3])), 2)
    assert {r.state for r in rollout.rows} <= {state_key(f"room {(i, j)}") for i in range(3) for j in range(3)}
    assert trainer.runner.state_anchor.__name__ == "room_anchor"


def broken_anchor(env, conversation):
    """A state_anchor that fails on every call."""
    raise KeyError("no room")


def test_a_raising_state_anchor_stops_the_run_in_one_line(tmp_path, tok):
    from milegpo.envs.anchors import AnchorError

    trainer = make_trainer(tmp_path, tok, state_anchor="test_tool_env.broken_anchor")
    with pytest.raises(AnchorError, match=r"the state_anchor callable raised KeyError: 'no room' at turn \d+"):
        trainer.play(list(dataset([3])), 2)


def test_trainer_plays_the_protocol_with_the_tiny_model(tmp_path, tok):
    """One iteration with the (untrained) tiny model through TRL's generation: every turn one row of the StepBatch,
    the credit over those rows, GRPOTrainer's tool metrics and states/distinct_per_group logged."""
    trainer = make_trainer(tmp_path, tok)
    trainer.train()
    record = trainer.records[0]
    rollout, batch = record["rollout"], record["batch"]
    assert len(batch) == len(rollout.rows) == sum(e.length for e in rollout.episodes) > 0
    assert len(rollout.episodes) == 6
    logged = trainer.state.log_history[0]
    for key in ("tools/call_frequency", "tools/failure_frequency", "states/distinct_per_group",
                "episode/success_rate", "credit/rows"):
        assert key in logged
    trained_rows = sorted(int(i) for ms in record["micro_steps"] for c in ms for i in c["row_index"] if i >= 0)
    assert trained_rows == list(range(len(rollout.rows)))
    metrics = trainer.evaluate()
    assert metrics["eval_heldout_episodes"] == 2 * trainer.args.eval_group_size


def test_scripted_policy_through_the_trainer(tmp_path, tok):
    """The trainer's generation replaced by the expert: every episode won, group-relative credit of winners is 0."""
    trainer = make_trainer(tmp_path, tok, method="grpo", horizon=12)
    trainer.generate_ids = expert_policy(tok)  # what play() generates with
    trainer.train()
    record = trainer.records[0]
    assert all(e.won for e in record["rollout"].episodes)
    assert trainer.state.log_history[0]["episode/success_rate"] == 1.0
    assert torch.all(record["result"].advantages == 0)  # every episode of each group won: GRPO has nothing to prefer
    assert record["batch"].next_state[record["batch"].success].eq(SINK).sum() == 6  # each episode ends in the sink


#: the maze without get_reward: its reward comes from a reward function, as in GRPOTrainer
PlainMaze = type("PlainMaze", (), {k: v for k, v in vars(MazeEnv).items() if k not in ("get_reward", "__dict__",
                                                                                      "__weakref__")})


def escaped(prompts, completions, completion_ids, environments, seed, trainer_state, **kwargs):
    """A reward function called as GRPOTrainer calls it: one episode, its row's columns, its environment."""
    assert len(prompts) == len(completions) == len(seed) == 1 and trainer_state is not None
    assert completions[0][-1]["role"] == "assistant"
    return [1.0 if environments[0].escaped else 0.0]


def test_reward_functions_score_an_environment_without_get_reward(tmp_path, tok):
    from milegpo.trainer import MileGPOTrainer

    args = make_config(str(tmp_path), 0, "grpo", 1, groups_per_iteration=2, group_size=2, horizon=12)
    trainer = MileGPOTrainer(make_model(tok, hidden=32, layers=1), args=args, processing_class=tok,
                             train_dataset=dataset(range(4)), environment_factory=PlainMaze, reward_funcs=[escaped])
    rollout = trainer.runner.run(list(dataset([0, 1])), 2, expert_policy(tok))
    assert [e.reward for e in rollout.episodes] == [1.0] * 4 and all(e.won for e in rollout.episodes)
    with pytest.raises(ValueError, match="No reward source provided"):  # GRPOTrainer's own refusal
        MileGPOTrainer(make_model(tok, hidden=32, layers=1), args=args, processing_class=tok,
                       train_dataset=dataset(range(4)), environment_factory=PlainMaze)


def test_trls_argument_order_and_what_differs_is_said(tmp_path, tok):
    """GRPOTrainer's positional order (model, reward_funcs, args, ...) works; the config where the reward functions
    go is a TypeError naming the order; reward functions called once per episode are announced (a warning); a
    reward function that raises is an error naming it."""
    from milegpo.trainer import MileGPOTrainer
    from milegpo.usage import RunError

    args = make_config(str(tmp_path), 0, "grpo", 1, groups_per_iteration=2, group_size=2, horizon=12)
    with pytest.raises(TypeError, match=r"GRPOTrainer's argument order \(model, reward_funcs, args, ...\): pass the "
                                        r"config as args="):
        MileGPOTrainer(None, args, processing_class=tok, train_dataset=dataset(range(4)), environment_factory=MazeEnv)
    with pytest.warns(UserWarning, match="once per finished episode .* GRPOTrainer calls it once per generation batch"):
        trainer = MileGPOTrainer(make_model(tok, hidden=32, layers=1), [escaped], args, dataset(range(4)),
                                 processing_class=tok, environment_factory=PlainMaze)
    assert trainer.reward_func_names == ["escaped"] and trainer.args is args
    assert [e.won for e in trainer.runner.run(list(dataset([0])), 2, expert_policy(tok)).episodes] == [True, True]

    def failing(completions, **kwargs):
        raise ZeroDivisionError("no episodes to normalise")

    with pytest.warns(UserWarning):
        trainer = MileGPOTrainer(make_model(tok, hidden=32, layers=1), [failing], args, dataset(range(4)),
                                 processing_class=tok, environment_factory=PlainMaze)
    with pytest.raises(RunError, match="reward function 'failing' raised ZeroDivisionError: no episodes to normalise"):
        trainer.runner.run(list(dataset([0])), 1, expert_policy(tok))


def test_an_in_memory_model_with_a_kl_term_gets_a_copy_as_reference(tmp_path, tok):
    """beta > 0 with a model object that has no name_or_path: GRPOTrainer would load the reference from "" (a long
    traceback); here the reference is a copy of the model as it was handed in, and the model keeps its (empty) name."""
    from milegpo.trainer import MileGPOTrainer

    model = make_model(tok, hidden=32, layers=1)
    assert model.config.name_or_path == ""
    trainer = MileGPOTrainer(model, args=make_config(str(tmp_path), 0, "milegpo", 1, groups_per_iteration=2,
                                                     group_size=2, beta=0.04),
                             processing_class=tok, train_dataset=dataset(range(4)), environment_factory=MazeEnv)
    assert trainer.ref_model is not None and trainer.ref_model is not trainer.model
    policy, reference = dict(trainer.model.named_parameters()), dict(trainer.ref_model.named_parameters())
    assert policy.keys() == reference.keys()
    assert all(torch.equal(policy[k], reference[k]) for k in policy)
    assert trainer.model.config.name_or_path == ""


def test_turn_advantage_moves_only_its_tokens(tmp_path, tok):
    """Perturb one row's (turn's) advantage: the loss gradient w.r.t. the last hidden states (one per position, the
    LM head's input, TRL's fused head reads them) changes at that row's completion tokens only; no prompt position
    (the previous turns, the tool results) has a gradient at all."""
    trainer = make_trainer(tmp_path, tok)
    rows = list(dataset(range(2)))
    rollout = trainer.runner.run(rows, 2, expert_policy(tok))
    n = len(rollout.rows)
    adv = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    captured = {}

    def keep(module, inputs, output):
        output.retain_grad()
        captured["hidden"] = output

    handle = model.model.norm.register_forward_hook(keep)
    try:
        grads = []
        for advantages in (adv, adv.clone().index_fill_(0, torch.tensor([3]), 5.0)):
            chunk = trainer._build_chunk(rollout.rows, advantages, list(range(n)), torch.tensor(100.0), n, None)
            model.zero_grad()
            trainer.compute_loss(model, chunk).backward()
            grads.append(captured["hidden"].grad.detach().abs().amax(-1))
    finally:
        handle.remove()
    mask = chunk["completion_mask"].bool()
    width, keep_len = chunk["prompt_ids"].shape[1], mask.shape[1]
    before, after = grads
    assert before.shape[1] == width + keep_len
    # position p predicts token p + 1: the completion tokens are predicted at width - 1 ... width + keep_len - 2
    predicting = before[:, width - 1:width - 1 + keep_len]
    assert (predicting[mask] > 0).all()  # every completion token has a gradient
    assert before[:, :width - 1].abs().max() == 0 and after[:, :width - 1].abs().max() == 0  # no prompt position
    moved = (before - after)[:, width - 1:width - 1 + keep_len].abs()
    assert (moved[3][mask[3]] > 0).all()  # every token of turn 3 moved
    others = torch.ones(n, dtype=torch.bool)
    others[3] = False
    assert moved[others].max() == 0  # no other turn's tokens moved
    assert moved[3][~mask[3]].sum() == 0  # nor turn 3's padding


def test_grpo_trainer_takes_the_same_class_and_dataset(tmp_path, tok):
    """The environment class and dataset MileGPOTrainer trains are GRPOTrainer's (constructed, not trained)."""
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", num_generations=2,
                      per_device_train_batch_size=2, max_steps=1, max_completion_length=8)
    trainer = GRPOTrainer(make_model(tok, hidden=32, layers=1), args=args, processing_class=tok,
                          train_dataset=dataset(range(4)), environment_factory=MazeEnv)
    assert sorted(t.__name__ for t in trainer._env_tools[None]) == ["look", "move"]


# ---------------------------------------------------------------------------------------------- the example learns
@pytest.mark.slow
def test_maze_example_learns_above_its_warm_start(tmp_path):
    """examples/train_maze.py: after a short warm start, a few RL iterations raise the held-out win rate."""
    from train_maze import run

    result = run(seed=0, method="milegpo", steps=6, output_dir=str(tmp_path), eval_seeds=range(1000, 1032),
                 sft_epochs=20)
    assert result["after"] > result["before"] + 0.1, result


def _vllm_python():
    from test_vllm import vllm_python

    return vllm_python()


@pytest.mark.slow
@pytest.mark.skipif(_vllm_python() is None, reason="no vLLM: run scripts/install_vllm.sh")
def test_vllm_colocate_environment_factory(tmp_path):
    """The maze through vLLM colocate on CPU: two iterations, the rows carry vLLM's sampling log-probs."""
    import subprocess

    script = os.path.join(os.path.dirname(__file__), "vllm_tool_script.py")
    proc = subprocess.run([_vllm_python(), script, str(tmp_path)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "2"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "ROW_LOGPROBS True" in out
    assert out.count('"step"') == 2

"""WebShopEnv: each page and action rule, invalid actions, rewards, the expert, steps_to_win, tasks, pools."""

from __future__ import annotations

import dataclasses
import json

import pytest

from milegpo.envs import UNWINNABLE, EnvError, make_env, match_action, state_key
from milegpo.envs.pool import EnvPool, SequentialPool
from milegpo.envs.webshop import WebShopEnv, webshop_tasks
from milegpo.rollout import EpisodeRunner, make_tasks, parse_action, render_prompt

from .conftest import SMALL


@pytest.fixture
def env():
    return WebShopEnv()


def _texts(obs: str) -> list[str]:
    return obs.split(" [SEP] ")


def _search(env, task, query=None):
    obs, _, info = env.reset(task)
    query = query or env.world.shop.by_asin[env.goal["asin"]]["Title"]
    return env.step(f"search[{query}]")


def test_search_page(env, small_tasks):
    task = small_tasks["test"][0]
    obs, admissible, info = env.reset(task)
    goal = env.goal["instruction_text"]
    assert obs == f"WebShop [SEP] Instruction: [SEP] {goal} [SEP] Search"
    assert admissible == ["search[<your query>]"]
    assert info["goal"] == goal and info["task_type"] == env.goal["category"] and info["score"] == 0.0
    assert info["state_key"] == state_key(info["state_text"]) and info["game_id"] == env.reset(task)[2]["game_id"]
    assert info["state_context"] == "Query: none."


def test_results_page_and_paging(env, small_tasks):
    obs, reward, terminated, truncated, info = _search(env, small_tasks["test"][0], "shampoo cotton table mug chips")
    texts = _texts(obs)
    total = len(env.session.results)
    assert 10 < total <= 50
    assert texts[:5] == ["Instruction:", env.goal["instruction_text"], "Back to Search",
                         f"Page 1 (Total results: {total})", "Next >"]
    listed = env.session.results[:10]
    products = env.world.shop.by_asin
    assert texts[5:] == [x for a in listed for x in (a, products[a]["Title"], products[a]["Price"])]
    assert info["admissible_actions"] == ["click[back to search]", "click[next >]", *[f"click[{a.lower()}]" for a in listed]]
    assert (reward, terminated, truncated, info["won"], info["invalid"]) == (0.0, False, False, False, False)
    obs2 = env.step("click[next >]")[0]
    assert _texts(obs2)[3:6] == [f"Page 2 (Total results: {total})", "< Prev", "Next >"]
    assert _texts(obs2)[6] == env.session.results[10]
    assert env.step("click[< prev]")[0] == obs
    for _ in range(5):  # past the last page WebShop still shows "Next >" over an empty listing
        last = env.step("click[next >]")[0]
    assert _texts(last)[3:] == [f"Page 6 (Total results: {total})", "< Prev", "Next >"]
    assert env.step("click[back to search]")[0].startswith("WebShop [SEP] Instruction:")


def _open_goal_product(env, task):
    _search(env, task)
    asin = env.goal["asin"]
    assert asin in env.session.results[:10]
    return env.step(f"click[{asin.lower()}]")


def test_item_page(env, small_tasks):
    obs, _, _, _, info = _open_goal_product(env, small_tasks["test"][1])
    product = env.world.shop.by_asin[env.goal["asin"]]
    groups = [x for g, values in product["options"].items() for x in (g, *values)]
    assert _texts(obs) == ["Instruction:", env.goal["instruction_text"], "Back to Search", "< Prev", *groups,
                           product["Title"], f"Price: {product['Price']}", f"Rating: {product['Rating']}",
                           "Description", "Features", "Reviews", "Buy Now"]
    values = [v for vs in product["options"].values() for v in vs]
    assert info["admissible_actions"] == ["click[back to search]", "click[< prev]", "click[description]",
                                          "click[features]", "click[reviews]", "click[buy now]",
                                          *[f"click[{v}]" for v in dict.fromkeys(values)]]
    # selecting an option changes the hidden state, not the text (WebShop's simple mode shows no radio state)
    group, (first, second, *_) = next((g, vs) for g, vs in product["options"].items() if len(vs) > 1)
    assert env.step(f"click[{first}]")[0] == obs and env.session.options == {group: first}
    # the default state anchor (tracked+actions) tells them apart: the tracker's context names the option selected
    info = env.step(f"click[{second}]")[4]
    assert info["state_text"] != obs and env.session.options == {group: second}
    assert f"Options selected: {group}: {second}." in info["state_context"]
    results = env.step("click[< prev]")[0]  # back to the results page it came from, options cleared
    assert "Page 1 (Total results:" in results and env.session.options == {}


def test_sub_pages_keep_the_options(env, small_tasks):
    _open_goal_product(env, small_tasks["test"][2])
    product = env.world.shop.by_asin[env.goal["asin"]]
    group, values = next(iter(product["options"].items()))
    env.step(f"click[{values[-1]}]")
    head = ["Instruction:", env.goal["instruction_text"], "Back to Search", "< Prev"]
    pages = {"description": [product["Description"]], "features": product["BulletPoints"],
             "reviews": [x for r in product["Reviews"] for x in (f'"{r["title"]}"', str(r["score"]), r["body"])]}
    for button, body in pages.items():
        obs, _, _, _, info = env.step(f"click[{button}]")
        assert _texts(obs) == head + [t for t in body if t]
        assert info["admissible_actions"] == ["click[back to search]", "click[< prev]"]
        env.step("click[< prev]")
        assert env.session.page == "item" and env.session.options == {group: values[-1]}


def test_attributes_page_with_show_attrs(env, small_tasks):
    task = dataclasses.replace(small_tasks["test"][2], options=small_tasks["test"][2].options + (("show_attrs", True),))
    obs = _open_goal_product(env, task)[0]
    assert "Reviews [SEP] Attributes [SEP] Buy Now" in obs
    product = env.world.shop.by_asin[env.goal["asin"]]
    texts = _texts(env.step("click[attributes]")[0])
    assert texts[4:] == [*product["Attributes"], product["category"], product["query"], product["product_category"]]


def _buy(env, task, options: dict) -> tuple:
    _open_goal_product(env, task)
    for value in options.values():
        env.step(f"click[{value}]")
    return env.step("click[buy now]")


def test_buying_the_goal_product_wins_ten(env, small_tasks):
    from milegpo.envs.webshop.reward import best_options, goal_option_values

    task = small_tasks["test"][3]
    env.reset(task)
    product = env.world.shop.by_asin[env.goal["asin"]]
    obs, reward, terminated, truncated, info = _buy(env, task, best_options(product, goal_option_values(env.goal)))
    assert (reward, terminated, truncated, info["won"], info["score"], info["lost"]) == (10.0, True, False, True, 1.0,
                                                                                        False)
    assert info["purchased"] == env.goal["asin"] and info["reward_info"]["r_type"] == 1.0
    assert _texts(obs)[:2] == ["Thank you for shopping with us!", "Your code:"] and info["admissible_actions"] == []
    assert env.steps_to_win() == 0
    with pytest.raises(EnvError, match="is done"):
        env.step("click[back to search]")


def test_buying_without_the_options_ends_lost_with_the_raw_score(env, small_tasks):
    task = next(t for t in small_tasks["test"] if env.reset(t) and env.goal["goal_options"])
    obs, reward, terminated, truncated, info = _buy(env, task, {})
    assert (reward, terminated, truncated, info["won"], info["lost"]) == (0.0, True, False, False, True)
    n_attr, n_opt = len(env.goal["attributes"]), len(env.goal["goal_options"])
    assert info["score"] == pytest.approx((n_attr + 1) / (n_attr + n_opt + 1))
    assert json.loads(_texts(obs)[8]) == {} and _texts(obs)[-1] == str(info["score"])
    assert env.steps_to_win() == UNWINNABLE


def test_reward_option_score_pays_ten_times_the_score(env, small_tasks):
    """reward="score": a purchase earns 10 x WebShop's raw score (a partial one too, and the win 10); "win", the
    default, is not written into the Task (same ids and options as before the option existed)."""
    from milegpo.envs.webshop.reward import best_options, goal_option_values

    scored = {t.seed: t for t in webshop_tasks("test", None, reward="score", **SMALL)}
    default = webshop_tasks("test", None, **SMALL)
    assert default == webshop_tasks("test", None, reward="win", **SMALL) and default == small_tasks["test"]
    assert all(dict(t.options)["reward"] == "score" for t in scored.values())
    task = next(t for t in small_tasks["test"] if env.reset(t) and env.goal["goal_options"])
    partial = _buy(env, scored[task.seed], {})  # the goal product without its options: a partial score
    assert 0.0 < partial[4]["score"] < 1.0 and partial[4]["won"] is False and partial[2] is True
    assert partial[1] == pytest.approx(10.0 * partial[4]["score"])
    assert _buy(env, task, {})[1] == 0.0  # the default "win": nothing for the same purchase
    env.reset(scored[task.seed])
    product = env.world.shop.by_asin[env.goal["asin"]]
    won = _buy(env, scored[task.seed], best_options(product, goal_option_values(env.goal)))
    assert won[1:4] == (10.0, True, False) and won[4]["won"] is True
    env.reset(scored[task.seed])
    assert env.step(f"search[{env.goal['query']}]")[1] == 0.0  # a step that buys nothing earns nothing


def test_reward_option_refuses_an_unknown_value(env, small_tasks):
    with pytest.raises(ValueError, match=r"WebShop reward must be one of \['win', 'score'\].*got 'points'"):
        webshop_tasks("test", 2, reward="points", **SMALL)
    bad = dataclasses.replace(small_tasks["test"][0], options=small_tasks["test"][0].options + (("reward", "x"),))
    with pytest.raises(EnvError, match="option reward must be one of"):
        env.reset(bad)


@pytest.mark.parametrize("action", ["click[nothing]", "search[shoes]", "jump", "", "click[]", "click[ ]",
                                    "Click[back to search]", "click[back to search] now", "click back to search",
                                    "click[b0000000000]", "\u2603[\u2603]", "x" * 5000, "click[[back to search]]"])
def test_unknown_and_malformed_actions_are_invalid_no_ops(env, small_tasks, action):
    _search(env, small_tasks["test"][4], "shampoo")
    before = env.last_obs
    obs, reward, terminated, truncated, info = env.step(action)
    assert (obs, reward, terminated, truncated, info["won"], info["invalid"]) == (before, 0.0, False, False, False, True)


@pytest.mark.parametrize("action", ["search[]", "search[   ]", "click[search]", "click[buy now]", "search [x]"])
def test_invalid_on_the_search_page(env, small_tasks, action):
    obs, _, _ = env.reset(small_tasks["test"][4])
    out = env.step(action)
    assert (out[0], out[1], out[2], out[3], out[4]["invalid"]) == (obs, 0.0, False, False, True)


def test_arguments_are_lower_cased_as_webshop_reads_them(env, small_tasks):
    _search(env, small_tasks["test"][4], "Shampoo")
    assert env.session.keywords == ["shampoo"]
    obs, _, _, _, info = env.step("click[Back To Search]")
    assert not info["invalid"] and obs.startswith("WebShop")


def test_search_anywhere(env, small_tasks):
    task = small_tasks["test"][4]
    anywhere = dataclasses.replace(task, options=task.options + (("search_anywhere", True),))
    obs, _, _, _, info = _search(env, anywhere, "shampoo")
    assert info["admissible_actions"][0] == "search[<your query>]"
    obs2, _, _, _, info2 = env.step("search[coffee table]")
    assert not info2["invalid"] and env.session.keywords == ["coffee", "table"] and obs2 != obs


def test_horizon_truncates(env, small_tasks):
    task = dataclasses.replace(small_tasks["test"][5], horizon=3)
    env.reset(task)
    env.step("search[mug]")
    env.step("click[next >]")
    out = env.step("click[next >]")
    assert out[3] and not out[2] and not out[4]["won"] and out[4]["truncated"] and out[4]["score"] == 0.0


def test_expert_wins_most_test_goals_and_steps_to_win_counts_down(small_tasks):
    env = WebShopEnv()
    wins = 0
    for task in small_tasks["test"]:
        env.reset(task)
        first = env.steps_to_win()
        assert 3 <= first <= 3 + len(env.goal["goal_options"]) + 1
        counts = [first]
        while not env.done:
            _, _, _, _, info = env.step(env.expert_action())
            won = info["won"]
            assert not info["invalid"]
            counts.append(env.steps_to_win())
        wins += won
        if won:
            assert counts[-1] == 0 and len(counts) - 1 >= first
            if len(counts) - 1 == first:  # an optimal episode lowers it by one at every step
                assert counts == list(range(first, -1, -1))
    assert wins >= 0.8 * len(small_tasks["test"])


def test_steps_to_win_by_hand(env, small_tasks):
    from milegpo.envs.webshop.reward import best_options, goal_option_values

    task = small_tasks["test"][6]
    _open_goal_product(env, task)
    needed = best_options(env.world.shop.by_asin[env.goal["asin"]], goal_option_values(env.goal))
    if env.world.winners(env.goal_index) == [(env.goal["asin"], needed)]:
        assert env.steps_to_win() == len(needed) + 1  # select each needed value, buy
    for value in needed.values():
        env.step(f"click[{value}]")
    assert env.steps_to_win() == 1
    env.step("click[description]")
    assert env.steps_to_win() == 2  # < prev keeps the options, then buy


def test_tasks_splits_filters_and_errors(small_tasks):
    test, train = small_tasks["test"], small_tasks["train"]
    assert [t.seed for t in test] == list(range(SMALL["test_goals"]))
    assert [t.seed for t in train] == list(range(SMALL["test_goals"], SMALL["test_goals"] + len(train)))
    assert len({t.task_id for t in test + train}) == len(test) + len(train)
    assert all(t.env == "webshop" and t.horizon == 30 for t in test)
    category = test[0].task_type
    beauty = webshop_tasks("test", None, task_type=category, **SMALL)
    assert beauty and all(t.task_type == category for t in beauty)
    assert webshop_tasks("train", 3, start=2, horizon=15, **SMALL) == [dataclasses.replace(t, horizon=15)
                                                                       for t in train[2:5]]
    with pytest.raises(EnvError, match="has 40 goals; asked for 41"):
        webshop_tasks("test", 41, **SMALL)
    with pytest.raises(ValueError, match="'train' or 'test'"):
        webshop_tasks("id", 1, **SMALL)
    via = make_tasks("webshop", "test", 2, horizon=20, options=SMALL)
    assert [t.seed for t in via] == [0, 1] and via[0].horizon == 20
    with pytest.raises(ValueError, match="not a setting of milegpo.envs.webshop_tasks"):
        make_tasks("webshop", "test", 2, options={"max_receptacles": 4})


def test_max_goal_options_keeps_the_goals_asking_that_few_options(small_tasks):
    """``max_goal_options``: the split's goals whose instruction asks at most that many options, their indices
    those of the whole split (the same Tasks), through make_tasks too; a bad value or too few goals is refused."""
    from milegpo.envs.webshop import get_world

    test = small_tasks["test"]
    goals = get_world(test[0].options).shop.goals
    for most in (0, 1):
        kept = webshop_tasks("test", None, max_goal_options=most, **SMALL)
        assert kept == [t for t in test if len(goals[t.seed]["goal_options"]) <= most]
        assert 0 < len(kept) < len(test) and all(len(goals[t.seed]["goal_options"]) <= most for t in kept)
    none = webshop_tasks("test", None, max_goal_options=0, **SMALL)
    assert make_tasks("webshop", "test", 2, options={**SMALL, "max_goal_options": 0}) == [
        dataclasses.replace(t, horizon=make_tasks("webshop", "test", 1, options=SMALL)[0].horizon) for t in none[:2]]
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_goal_options must be an int >= 0"):
            webshop_tasks("test", 1, max_goal_options=bad, **SMALL)
    with pytest.raises(EnvError, match=f"/ at most 0 goal options of the .* has {len(none)} goals; asked for 41"):
        webshop_tasks("test", 41, max_goal_options=0, **SMALL)


def test_real_data_dir_and_webshop_data(monkeypatch, fixture_dir, tmp_path):
    tasks = webshop_tasks("test", None, data_dir=fixture_dir)
    assert len(tasks) == 3 and dict(tasks[0].options)["data_dir"] == str(fixture_dir.resolve())
    monkeypatch.setenv("WEBSHOP_DATA", str(fixture_dir))
    assert webshop_tasks("test", None) == tasks
    env = make_env("webshop")
    obs, _, info = env.reset(tasks[0])
    assert info["goal"] == env.goal["instruction_text"] and obs.endswith("[SEP] Search")
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path / "gone"))
    with pytest.raises(EnvError, match=f"WebShop data directory {tmp_path / 'gone'} does not exist"):
        webshop_tasks("test", 1)


def test_match_action_templates_and_parse_action():
    admissible = ["search[<your query>]", "click[back to search]"]
    assert match_action("search[red shoes]", admissible) == "search[red shoes]"
    assert match_action("search[ ]", admissible) is None and match_action("search[]", admissible) is None
    assert match_action("Search[red shoes]", admissible) is None  # strict: as spelled
    assert match_action("click[back to search]", admissible) == "click[back to search]"
    assert match_action("click[anything]", admissible) is None
    assert match_action("go to desk 1", ["go to desk 1"]) == "go to desk 1"
    p = parse_action("<think>t</think><action> Search[Red   Shoes ] </action>", admissible, require_think=True)
    assert p == ("search[Red Shoes]", True, "")
    assert parse_action("<action>CLICK[Back to Search]</action>", admissible) == ("click[back to search]", True, "")
    assert parse_action("<action>click[x]</action>", admissible).reason == "not_admissible"


def test_webshop_prompt_is_verl_agents(env, small_tasks):
    obs, admissible, info = env.reset(small_tasks["test"][0])
    text = render_prompt(info["goal"], obs, admissible, [], 0, 2, style="webshop")
    assert text.startswith("\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment. \n")
    assert f"Your task is to: {info['goal']}.\nYour current observation is: 'Search'.\n" in text
    assert "[\n'search[<your query>]',\n]." in text and "Prior to this step" not in text
    action = f"search[{env.goal['name']}]"
    obs2, _, _, _, info2 = env.step(action)
    text2 = render_prompt(info["goal"], obs2, info2["admissible_actions"], [(obs, action)], 1, 2, style="webshop")
    assert "Prior to this step, you have already taken 1 step(s). Below are the most recent 1 observations" in text2
    assert f"[Observation 1: ''Search'', Action 1: '{action}']" in text2
    assert "You are now at step 2 and your current observation is: 'Back to Search' [SEP] 'Page 1 (Total" in text2


def test_compact_prompt_shows_webshop_pages_without_their_instruction(env, small_tasks):
    """The compact prompt states the task once: a page shows from ``Back to Search`` on, in the history too."""
    obs, admissible, info = env.reset(small_tasks["test"][0])
    goal = info["goal"]
    assert _texts(obs)[:3] == ["WebShop", "Instruction:", goal]
    assert render_prompt(goal, obs, admissible, [], 0, 1, style="compact") == (
        f"Task: {goal}\nBefore: \nNow: Search\nActions: search[<your query>]")
    action = f"search[{env.goal['name']}]"
    obs2, _, _, _, info2 = env.step(action)
    text = render_prompt(goal, obs2, info2["admissible_actions"], [(obs, action)], 1, 1, style="compact")
    assert text.count(goal) == 1 and "Instruction:" not in text
    assert f"Before: [Search -> {action}]\nNow: Back to Search [SEP] Page 1 (Total" in text


def test_a_pool_left_open_ends_without_a_leaked_semaphore_warning(tmp_path):
    """WebShop's workers hold semaphores: a pool left open at exit closes them itself rather than leave them to
    multiprocessing's exit handler (which kills them, and Python then warns of leaked semaphores)."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "open_pool.py"
    script.write_text(textwrap.dedent(f"""
        from milegpo.envs.pool import EnvPool
        from milegpo.envs.webshop import webshop_tasks

        if __name__ == "__main__":
            tasks = webshop_tasks("test", 2, **{SMALL!r})
            pool = EnvPool(2, num_workers=2)
            pool.reset(tasks)
            pool.step({{0: "search[red shoes]", 1: "search[coffee]"}})
            print("played")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "played" in out.stdout, out.stderr
    assert "leaked semaphore" not in out.stderr, out.stderr


def _replay(pool, tasks, scripts):
    outs = [pool.reset(tasks)]
    for step in range(max(len(s) for s in scripts)):
        actions = {i: s[step] for i, s in enumerate(scripts) if step < len(s)}
        outs.append([None if o is None else (o.obs, o.reward, o.done, o.won, o.info["score"], o.info["invalid"])
                     for o in pool.step(actions)])
    return outs


def test_env_pool_with_two_workers_equals_in_process(small_tasks):
    tasks = [small_tasks["test"][i] for i in (0, 1, 2, 0)]
    scripts = []
    for task in tasks:
        env = WebShopEnv()
        env.reset(task)
        while not env.done:
            env.step(env.expert_action())
        scripts.append([a for _, _, a in env.trace] if len(scripts) < 3 else ["search[mug]", "click[nothing]"])
    with SequentialPool(4) as seq, EnvPool(4, num_workers=2, step_timeout=60, reset_timeout=120) as procs:
        assert _replay(seq, tasks, scripts) == _replay(procs, tasks, scripts)


def test_episode_runner_plays_webshop(small_tasks):
    def generate(prompts):
        texts = ["<think>x</think><action>search[shampoo]</action>"] * len(prompts)
        return [[1]] * len(prompts), [[2]] * len(prompts), None, texts

    runner = EpisodeRunner(SequentialPool(4), horizon=2, prompt_style="webshop")
    rollout = runner.run(small_tasks["test"][:2], group_size=2, generate=generate)
    assert len(rollout.episodes) == 4 and all(e.truncated and e.length == 2 for e in rollout.episodes)
    first, second = [r for r in rollout.rows if r.traj == 0]
    assert (first.action, first.invalid) == ("search[shampoo]", False)
    assert second.invalid  # the results page has no search box
    rollout.step_batch()


def test_episode_runner_reports_webshops_score(small_tasks):
    """Each episode's score is the env's raw score at its end; ``score`` = their mean x 100 (the paper's)."""
    from milegpo.rollout import episode_metrics

    tasks = small_tasks["test"][:6]
    scripts, scores = [], []
    for i, task in enumerate(tasks):  # the expert, or the expert's first product bought without its options
        env = WebShopEnv()
        env.reset(task)
        while not env.done:
            info = env.step(env.expert_action() if i % 2 == 0 or env.session.page != "item" else "click[buy now]")[4]
        scripts.append([a for _, _, a in env.trace])
        scores.append(info["score"])
    assert 0.0 < min(scores) < 1.0 == max(scores)  # partial scores too
    steps = [0] * len(tasks)

    def generate(prompts):  # replays each episode's script; the live episodes come in slot order
        live = [t for t in range(len(tasks)) if steps[t] < len(scripts[t])]
        assert len(live) == len(prompts)
        texts = []
        for t in live:
            texts.append(f"<think>x</think><action>{scripts[t][steps[t]]}</action>")
            steps[t] += 1
        return [[1]] * len(prompts), [[2]] * len(prompts), None, texts

    rollout = EpisodeRunner(SequentialPool(6), horizon=20, prompt_style="webshop", parts=1).run(tasks, 1, generate)
    assert [e.score for e in rollout.episodes] == scores
    m = episode_metrics(rollout.episode_summaries())
    assert m["score"] == pytest.approx(100 * sum(scores) / len(scores))
    assert m["success_rate"] == pytest.approx(sum(s == 1.0 for s in scores) / len(scores))


def test_bad_goal_index_is_an_error(env, small_tasks):
    with pytest.raises(EnvError, match="goal index 100000 is out of range"):
        env.reset(dataclasses.replace(small_tasks["test"][0], seed=100000))
    with pytest.raises(EnvError, match="has no seed"):
        env.reset(dataclasses.replace(small_tasks["test"][0], seed=None))


def test_nothing_is_downloaded(monkeypatch, tmp_path):
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("WebShop tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("MILEGPO_CACHE", str(tmp_path))  # a fresh cache: catalog and index built here
    task = webshop_tasks("test", 1, catalog_size=60, catalog_seed=5, test_goals=5)[0]
    env = WebShopEnv()
    env.reset(task)
    while not env.done:
        env.step(env.expert_action())
    assert (tmp_path / "webshop" / "catalog").is_dir() and (tmp_path / "webshop" / "index").is_dir()


def test_webshop_refuses_a_non_string_action_and_an_unknown_category():
    from milegpo.envs.webshop import WebShopEnv

    env = WebShopEnv()
    env.reset(webshop_tasks("test", 1, **SMALL)[0])
    with pytest.raises(TypeError, match=r"WebShopEnv.step: an action is a str"):
        env.step(None)
    assert env.steps == 0
    with pytest.raises(ValueError, match=r"WebShop task_type \(a goal category\) must be one of the embedded catalog "
                                         r"\(300 products, seed 0\)'s \[.*'beauty'.*\], got 'spaceships'"):
        webshop_tasks("test", 1, task_type="spaceships", **SMALL)


def test_episodes_are_the_same_with_and_without_workers_and_overlap(small_tasks):
    from tests.rollout.scripted import play

    tasks = small_tasks["test"][:3]
    settings = [("sequential", False), ("workers-2", True), ("workers-1", False), ("workers-3", True)]
    ref = play(settings, tasks, 2, 6, prompt_style="webshop", horizon=5)
    assert len(ref.episodes) == 6 and {r.action.split("[")[0] for r in ref.rows} >= {"search", "click"}


def test_pool_workers_see_the_environment_of_the_pools_maker(small_tasks, monkeypatch, tmp_path):
    task = webshop_tasks("test", 1, catalog_size=60, catalog_seed=7, test_goals=5)[0]
    with EnvPool(1, num_workers=1) as pool:  # the forkserver runs from here on, with this environment
        pool.reset([small_tasks["test"][0]])
    monkeypatch.setenv("MILEGPO_CACHE", str(tmp_path / "cache"))
    with EnvPool(1, num_workers=1) as pool:
        pool.reset([task])
    assert list((tmp_path / "cache" / "webshop").iterdir())  # the worker built the catalog where it was told

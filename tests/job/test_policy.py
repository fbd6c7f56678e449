"""The tiny policy built on the spot (tokenizer, Qwen2) and the warm start's expert data."""

import pytest
import torch


def test_tiny_tokenizer_reloads_faithfully(tmp_path):
    """The rollout must see the tokens the warm start saw, and decode keeps <action> tags."""
    from milegpo.job.policy import completion_text, easy_tasks, expert_pairs, make_tokenizer, reload_tokenizer

    tok = make_tokenizer(n_tasks=8)
    tok.save_pretrained(tmp_path)
    back = reload_tokenizer(str(tmp_path))
    prompt, completion = expert_pairs(easy_tasks("train", 1))[0]
    msgs = [{"role": "user", "content": prompt}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    assert back.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                    return_dict=True)["input_ids"] == ids
    comp = back(completion_text("inventory"))["input_ids"] + [back.eos_token_id]
    text = back.batch_decode([comp], skip_special_tokens=True)[0]
    assert "<action>" in text and "inventory" in text


def test_tiny_model_starts_action_phrases_from_their_words():
    from milegpo.job.policy import easy_tasks, expert_pairs, make_model, make_tokenizer

    tok = make_tokenizer(n_tasks=8)
    emb = make_model(tok).get_input_embeddings().weight
    phrase = "go to sidetable 1"
    pid = tok.convert_tokens_to_ids(phrase)
    assert pid != tok.unk_token_id
    words = tok.convert_tokens_to_ids(phrase.split())
    torch.testing.assert_close(emb[pid], emb[words].mean(0))
    # the warm start's labels come from the searching expert by default, the oracle on request
    tasks = easy_tasks("train", 3)
    assert expert_pairs(tasks) == expert_pairs(tasks, expert="search")
    assert expert_pairs(tasks, expert="oracle") != expert_pairs(tasks)
    with pytest.raises(ValueError, match="expert must be 'search' or 'oracle'"):
        expert_pairs(tasks, expert="cheat")


WEBSHOP_SMALL = {"catalog_size": 300, "test_goals": 40}


def test_warm_start_data_come_from_any_worlds_expert(private_webshop_cache):
    """One interface: the household world's searching expert and WebShop's shopping expert are both
    ``env.expert("search")``; a world without the asked expert names those it has."""
    from milegpo.envs import make_env
    from milegpo.job.policy import completion_text, expert_pairs, met_actions
    from milegpo.rollout import make_tasks

    tasks = make_tasks("webshop", "train", 2, horizon=10, options=WEBSHOP_SMALL)
    pairs = expert_pairs(tasks, prompt_style="webshop")
    env = make_env("webshop")
    env.reset(tasks[0])
    labels = []
    while not env.done:
        labels.append(env.expert_action())
        env.step(labels[-1])
    assert env.won and [c for _, c in pairs[:len(labels)]] == [completion_text(a) for a in labels]
    assert pairs[0][0].startswith("\nYou are an expert autonomous agent operating in the WebShop")
    assert "click[buy now]" in met_actions(tasks)
    with pytest.raises(ValueError, match="WebShopEnv: expert must be 'search', got 'oracle'"):
        expert_pairs(tasks, expert="oracle")


def test_webshop_tiny_tokenizer(tmp_path, private_webshop_cache):
    from milegpo.envs.webshop import get_world
    from milegpo.envs.webshop.search import analyze
    from milegpo.job.policy import expert_pairs, make_tokenizer, reload_tokenizer
    from milegpo.rollout import make_tasks, parse_action

    make_tokenizer(n_tasks=4, env="webshop", options=WEBSHOP_SMALL).save_pretrained(tmp_path)
    tok = reload_tokenizer(str(tmp_path))
    tasks = make_tasks("webshop", "test", 3, horizon=10, options=WEBSHOP_SMALL)
    searches = 0
    for prompt, completion in expert_pairs(tasks, explore=0.5, prompt_style="webshop"):
        assert tok.unk_token_id not in tok(prompt)["input_ids"]  # every word a page shows is a token
        action = parse_action(completion, ["search[<your query>]"]).action
        decoded = parse_action(tok.decode(tok(completion)["input_ids"], skip_special_tokens=True),
                               ["search[<your query>]"]).action
        if action.startswith("search["):  # "men's" comes back as "men ' s": the same search terms
            searches += 1
            assert decoded.startswith("search[") and analyze([decoded[7:-1]]) == analyze([action[7:-1]])
        else:
            assert decoded == action  # "click[b0x]", "click[buy now]" as written
    assert searches >= 3
    for phrase in ("click[buy now]", "click[< prev]", "[sep]"):
        assert tok.convert_tokens_to_ids(phrase) != tok.unk_token_id
    asin = get_world(tasks[0].options).shop.products[0]["asin"]
    listed, clicked = tok(f"'{asin}' [SEP]")["input_ids"][1], tok(f"click[{asin.lower()}]")["input_ids"][2]
    assert listed == clicked != tok.unk_token_id  # the ASIN on the results page is the token the click copies


def test_any_text_environment_gets_a_tiny_tokenizer_of_its_own_words(tmp_path):
    """Issue 48.9: "the embedded tiny policy has a tokenizer for household, webshop only". A user's world (here a
    gymnasium class by its dotted path) is played a few seeded episodes with its admissible actions: its words
    are tokens, each admissible action of several words one token, the same tokenizer on every build."""
    pytest.importorskip("gymnasium")
    from milegpo.job.policy import make_tokenizer, reload_tokenizer

    kind = "tests.envs.text_games:KeyDoor"
    tok = make_tokenizer(env=kind)
    assert tok.get_vocab() == make_tokenizer(env=kind).get_vocab()  # deterministic
    for phrase in ("go left", "go right", "take key", "open door", "break door", "go back"):
        assert tok.convert_tokens_to_ids(phrase) != tok.unk_token_id, phrase
    prompt = "Now: You are in the left room. A key lies on the floor. holding: nothing Actions: go back, look, take key"
    assert tok.unk_token_id not in tok(prompt)["input_ids"]
    tok.save_pretrained(tmp_path)
    again = reload_tokenizer(str(tmp_path))
    text = "<think> i act </think> <action> take key </action>"
    assert again.decode(again(text)["input_ids"]) == text
    free = make_tokenizer(env="tests.envs.text_games:FreeKeyDoor")  # free text: the words it shows
    assert free.unk_token_id not in free("You are in the hall. Doors lead left and right.")["input_ids"]


@pytest.mark.parametrize("style", ["compact", "alfworld"])
@pytest.mark.parametrize("show_context", [True, False])
def test_warm_start_prompts_are_the_rollouts_prompts(style, show_context):
    """The warm start learns on the prompts the rollout shows, the state tracker's context line included when the
    run shows it (issue 50: the warm start had learned prompts without the line that every rollout prompt has)."""
    from milegpo.envs import HouseholdEnv
    from milegpo.envs.pool import SequentialPool
    from milegpo.job.policy import easy_tasks, expert_pairs
    from milegpo.rollout import EpisodeRunner

    task = easy_tasks("train", 1, start=5, max_receptacles=4)[0]
    walkthrough = HouseholdEnv().walkthrough(task, "search")
    seen = []

    def expert(prompts):
        seen.extend(prompts)
        text = f"<think> i act </think> <action> {walkthrough[len(seen) - 1]} </action>"
        return [[1]], [[2]], None, [text]

    runner = EpisodeRunner(SequentialPool(1), history_length=2, horizon=8, prompt_style=style,
                           show_state_context=show_context, parts=1)
    assert runner.run([task], 1, expert).episodes[0].won
    pairs = expert_pairs([task], prompt_style=style, show_context=show_context)
    assert [prompt for prompt, _ in pairs] == seen
    assert ("Items in hand (status)" in seen[0]) == show_context


def test_tiny_tokenizer_knows_every_word_of_the_rollout_prompts():
    """No word of the expert's prompts is <unk> to the embedded tokenizer, the state tracker's context line included
    (before issue 50 "Location", "Items", "hand", "status" were)."""
    from milegpo.job import TINY_DEFAULTS
    from milegpo.job.policy import easy_tasks, expert_pairs, make_tokenizer

    options = TINY_DEFAULTS["env_options"]
    tok = make_tokenizer(env="household", options=options)
    tasks = easy_tasks("id", 6, max_receptacles=options["max_receptacles"])
    for prompt, _ in expert_pairs(tasks, prompt_style=TINY_DEFAULTS["prompt_style"]):
        assert "Location:" in prompt
        assert tok.unk_token_id not in tok(prompt)["input_ids"], prompt


def test_tiny_tokenizer_knows_every_word_the_world_answers():
    """Nor of what the world answers to the actions the expert never plays (`inventory`, `look`, `examine`, `close`:
    "You are not carrying anything.", "You are facing the ..."), which a policy meets: random play with another seed
    than the corpus's, longer, on games it partly did not play (without the corpus's random play, "There's nothing
    special about ..." was <unk>)."""
    import random

    from milegpo.envs import make_env
    from milegpo.job import TINY_DEFAULTS
    from milegpo.job.policy import easy_tasks, make_tokenizer

    options = TINY_DEFAULTS["env_options"]
    tok = make_tokenizer(env="household", options=options)
    rng, verbs = random.Random(7), set()
    for task in easy_tasks("ood", 6, horizon=30, max_receptacles=options["max_receptacles"])[2:]:
        env = make_env(task.env)
        obs, admissible, _ = env.reset(task)
        while not env.done:
            assert tok.unk_token_id not in tok(obs)["input_ids"], obs
            action = rng.choice(admissible)
            verbs.add(action.split(" ", 1)[0])
            obs, _, _, _, info = env.step(action)
            admissible = info["admissible_actions"]
        env.close()
    assert {"inventory", "look", "examine"} <= verbs  # the answers the expert's corpus lacks were met

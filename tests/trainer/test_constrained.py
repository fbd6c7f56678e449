"""constrain_actions: a completion outside the row's admissible actions cannot be produced.

The policy is a tiny Qwen2 whose logits are pushed (+100) towards a scripted completion that names an action the
page does not offer (``click[<an ASIN not on the page>]``, the tiny WebShop policy's failure): unconstrained it
writes that completion; constrained, every row writes one of its own admissible actions, through transformers'
``generate`` directly and through MileGPOTrainer's generation (TRL's ``_generate_single_turn``).
"""

from __future__ import annotations

import re

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from milegpo.rollout import parse_action
from milegpo.trainer.constrained import ActionConstraint, Vocabulary, action_regex, allowed_tokens_fn, goal_words

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizer(private_webshop_cache, tmp_path_factory):
    """The tiny WebShop tokenizer of a 30-product catalog, saved and reloaded as a run reloads it (the in-memory
    one drops its added tokens in ``batch_decode(skip_special_tokens=True)``: milegpo.job.policy.reload_tokenizer)."""
    from milegpo.job.policy import make_tokenizer, reload_tokenizer

    path = tmp_path_factory.mktemp("tok")
    make_tokenizer(env="webshop", options={"catalog_size": 30, "test_goals": 10}, n_tasks=4).save_pretrained(path)
    return reload_tokenizer(str(path))


def _asins(tok) -> list[str]:
    from milegpo.envs.webshop import get_world
    from milegpo.envs.webshop.env import world_options

    world = get_world(world_options(catalog_size=30))
    asins = [p["asin"].lower() for p in world.shop.products]
    return [a for a in asins if tok.convert_tokens_to_ids(a) != tok.unk_token_id]


class ScriptedQwen(Qwen2ForCausalLM):
    """A tiny Qwen2 whose next-token logits get +100 on the next token of ``script`` after the longest suffix of
    the input that is a prefix of it (the script starts at the prompt's last token): it prefers the script."""

    script: list[int] = []

    def forward(self, input_ids=None, **kw):
        out = super().forward(input_ids=input_ids, **kw)
        for row, ids in enumerate(input_ids.tolist()):
            for k in range(min(len(ids), len(self.script) - 1), 0, -1):
                if ids[-k:] == self.script[:k]:
                    out.logits[row, -1, self.script[k]] += 100.0
                    break
        return out


def scripted_model(tok, completion: str) -> ScriptedQwen:
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=None)
    model = ScriptedQwen(cfg).eval()
    model.script = [tok.convert_tokens_to_ids("<|assistant|>")] + tok(completion, add_special_tokens=False)[
        "input_ids"] + [tok.eos_token_id]
    return model


def _generate(model, tok, prompts, max_new_tokens=24, **kw):
    batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0, top_k=0,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, use_cache=False, **kw)
    return tok.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)


def _pages(tok):
    asins = _asins(tok)
    bad = asins[0]
    pages = [["click[back to search]", "click[next >]", *(f"click[{a}]" for a in asins[1:4])],
             ["click[back to search]", "click[< prev]", "click[buy now]", "click[description]"],
             ["search[<your query>]"],
             ["click[back to search]", f"click[{asins[4]}]", "click[next >]"]]
    return bad, pages


def test_unconstrained_the_scripted_model_writes_the_invalid_action(tokenizer):
    bad, pages = _pages(tokenizer)
    model = scripted_model(tokenizer, f"<think> i act </think> <action> click [ {bad} ] </action>")
    texts = _generate(model, tokenizer, ["<|user|> shop <|assistant|>"] * len(pages))
    for text, admissible in zip(texts, pages):
        parsed = parse_action(text, admissible)
        assert parsed.action == f"click[{bad}]" and not parsed.valid, text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constrained_every_row_writes_one_of_its_admissible_actions(tokenizer, seed):
    bad, pages = _pages(tokenizer)
    model = scripted_model(tokenizer, f"<think> i act </think> <action> click [ {bad} ] </action>")
    torch.manual_seed(seed)
    fn = allowed_tokens_fn(tokenizer, [tokenizer.eos_token_id], pages, 24)
    texts = _generate(model, tokenizer, ["<|user|> shop <|assistant|>"] * len(pages), prefix_allowed_tokens_fn=fn)
    for text, admissible in zip(texts, pages):
        parsed = parse_action(text, admissible)
        assert parsed.valid, (text, admissible)
        assert text.count("<action>") == 1 and text.rstrip().endswith("</action>"), text
    # the search row: the prefix search[ and a query of the policy's own (words, no brackets or tags), then ]
    query = re.fullmatch(r".*<action> search\[(.+)\] </action>\s*", texts[2], re.DOTALL)
    assert query and query.group(1).strip() and not set("[]<>") & set(query.group(1)), texts[2]


def _goal(tok) -> str:
    """An instruction of the 30-product catalog (its words are in the tiny tokenizer's vocabulary)."""
    from milegpo.envs.webshop import get_world
    from milegpo.envs.webshop.env import world_options

    return get_world(world_options(catalog_size=30)).shop.goals[0]["instruction_text"]


def _query_of_words(tok, text: str, words) -> bool:
    """Whether the search block of ``text`` holds a query that is a sequence of ``words`` (each as the tokenizer
    writes it back: the tiny one spaces a word's punctuation, ``men ' s``) separated by single spaces."""
    forms = sorted({tok.decode(tok(w, add_special_tokens=False)["input_ids"]) for w in words}, key=len, reverse=True)
    word = "(" + "|".join(re.escape(f) for f in forms) + ")"
    return re.fullmatch(rf".*<action> search\[{word}( {word})*\] </action>\s*", text, re.DOTALL) is not None


def test_goal_words():
    assert goal_words("I need a red scarf, and price lower than 40.00 dollars") == (
        "i", "need", "a", "red", "scarf", "and", "price", "lower", "than", "40.00", "dollars")
    assert goal_words('"men\'s" shoes (size 9) red red x[1] <b>') == ("men's", "shoes", "size", "9", "red")
    with pytest.raises(ValueError, match="has no word a query could use"):
        goal_words(" , [x] ")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constrained_query_is_made_of_the_goal_words(tokenizer, seed):
    """The scripted model writes an ASIN as its query (a word the goal does not hold): a free query keeps it; with
    the goal's words (constrain_query) every search row's query is a sequence of them, and the other rows still
    write one of their admissible actions; a tight budget still ends the query on a whole word."""
    bad, pages = _pages(tokenizer)
    goal = _goal(tokenizer)
    words = goal_words(goal)
    assert bad not in words and all(tokenizer.unk_token_id not in tokenizer(w, add_special_tokens=False)["input_ids"]
                                    for w in words)
    model = scripted_model(tokenizer, f"<think> i act </think> <action> search [ {bad} {bad} ] </action>")
    rows = [pages[2]] * 3 + [pages[0]]
    prompts = ["<|user|> shop <|assistant|>"] * len(rows)
    torch.manual_seed(seed)
    free = _generate(model, tokenizer, prompts, prefix_allowed_tokens_fn=allowed_tokens_fn(
        tokenizer, [tokenizer.eos_token_id], rows, 24))
    assert all(f"search[{bad} {bad}]" in t for t in free[:3]), free
    for budget in (24, 12):
        torch.manual_seed(seed)
        fn = allowed_tokens_fn(tokenizer, [tokenizer.eos_token_id], rows, budget, [words] * 3 + [None])
        texts = _generate(model, tokenizer, prompts, max_new_tokens=budget, prefix_allowed_tokens_fn=fn)
        assert all(parse_action(t, a).valid for t, a in zip(texts, rows)), texts
        assert all(_query_of_words(tokenizer, t, words) for t in texts[:3]), (texts, words)
        assert all(bad not in t for t in texts[:3]), texts


def test_the_budget_opens_the_block_in_time_and_a_too_small_one_is_refused(tokenizer):
    _, pages = _pages(tokenizer)
    model = scripted_model(tokenizer, "<think> " + "i act " * 40 + "</think>")  # it would think past the budget
    fn = allowed_tokens_fn(tokenizer, [tokenizer.eos_token_id], pages, 12)
    texts = _generate(model, tokenizer, ["<|user|> shop <|assistant|>"] * len(pages), max_new_tokens=12,
                      prefix_allowed_tokens_fn=fn)
    assert all(parse_action(t, a).valid for t, a in zip(texts, pages)), texts
    with pytest.raises(ValueError, match="max_completion_length=5 tokens cannot hold <action> and the longest"):
        allowed_tokens_fn(tokenizer, [tokenizer.eos_token_id], pages, 5)


def test_a_row_without_admissible_actions_is_free_and_the_vocabulary_is_cached(tokenizer):
    fn = allowed_tokens_fn(tokenizer, [tokenizer.eos_token_id], [[]], 8)
    assert fn(0, torch.tensor([1, 2])) == list(range(len(tokenizer)))
    assert allowed_tokens_fn(tokenizer, [tokenizer.eos_token_id], [[]], 8).v is fn.v
    with pytest.raises(ValueError, match="needs an EOS token"):
        Vocabulary(tokenizer, [])


class PieceTokenizer:
    """A tokenizer of fixed pieces (greedy longest match; decode joins the pieces as written), where ``<action>``
    is two tokens (``<act``, ``ion>``) and other splits (``<``, ``action``, ``>``) spell it too, as in BPE."""

    pieces = ["<pad>", "<eos>", "<", "action", ">", "<act", "ion>", "</action>", "[", "]", "x", "stay", "go", " "]
    all_special_ids = [0, 1]

    def __len__(self):
        return len(self.pieces)

    def __call__(self, text, add_special_tokens=False):
        ids = []
        while text:
            i = max((i for i, p in enumerate(self.pieces) if text.startswith(p)), key=lambda i: len(self.pieces[i]))
            ids.append(i)
            text = text[len(self.pieces[i]):]
        return {"input_ids": ids}

    def decode(self, ids, **kw):
        return "".join(self.pieces[i] for i in ids)


def test_a_spelling_of_the_open_tag_other_than_its_own_tokens_is_refused():
    """Where ``<action>`` has several spellings in tokens, the free text cannot open an unconstrained block: only
    the tag's own encoding opens one (and then the trie holds)."""
    tok = PieceTokenizer()
    at = {p: i for i, p in enumerate(tok.pieces)}
    v = Vocabulary(tok, [at["<eos>"]])
    assert v.open_ids == [at["<act"], at["ion>"]]
    fn = ActionConstraint(v, [["stay"]], 30)
    start = [at["x"]]  # the prompt: the first call of a row sees only it
    assert at["<eos>"] not in fn(0, torch.tensor(start))  # no end before the action
    fn(0, torch.tensor(start + [at["<"]]))
    allowed = fn(0, torch.tensor(start + [at["<"], at["action"]]))
    assert at[">"] not in allowed and at["x"] in allowed  # "<" "action" ">" would spell the tag: refused
    fresh = ActionConstraint(v, [["stay"]], 30)
    fresh(0, torch.tensor(start))
    assert fresh(0, torch.tensor(start + [at["<act"], at["ion>"]])) == [at["stay"]]  # the tag's own tokens open it
    assert fresh(0, torch.tensor(start + [at["<act"], at["ion>"], at["stay"]])) == [at["</action>"]]
    assert fresh(0, torch.tensor(start + [at["<act"], at["ion>"], at["stay"], at["</action>"]])) == [at["<eos>"]]


def test_action_regex_admits_exactly_the_admissible_actions():
    regex = action_regex(["click[buy now]", "search[<your query>]", "click[< prev]", "click[b0x1.a]"])
    good = ["i act <action>click[buy now]</action>", "<action>search[red shoes, size 9]</action>",
            "<action>click[< prev]</action>", "<action>click[b0x1.a]</action>",
            "<action>click[b0x]</action> then <action>click[buy now]</action>"]  # the last block is admissible
    bad = ["<action>search[]</action>", "<action>search[ ]</action>", "<action>search[a]b]</action>",
           "<action>click[b0x1xa]</action>", "<action>click[buy now]</action> more", "click[buy now]"]
    assert all(re.fullmatch(regex, t) for t in good)
    assert not any(re.fullmatch(regex, t) for t in bad)
    # with the goal's words (constrain_query): a query is a sequence of them, nothing else
    regex = action_regex(["click[buy now]", "search[<your query>]"], goal_words("a red (wool) scarf, 40.00 dollars"))
    good = ["<action>search[red scarf]</action>", "<action>search[scarf red wool red]</action>",
            "<action>search[40.00]</action>", "i act <action>click[buy now]</action>"]
    bad = ["<action>search[blue scarf]</action>", "<action>search[red  scarf]</action>",
           "<action>search[ red]</action>", "<action>search[red ]</action>", "<action>search[]</action>",
           "<action>search[40x00]</action>", "<action>search[scarf,]</action>", "<action>search[redscarf]</action>"]
    assert all(re.fullmatch(regex, t) for t in good)
    assert not any(re.fullmatch(regex, t) for t in bad)


@pytest.mark.slow
def test_the_trainer_constrains_its_generation(tmp_path, tokenizer):
    """MileGPOTrainer(constrain_actions=True) through TRL's own transformers generation path."""
    from milegpo.trainer.config import MileGPOConfig
    from milegpo.envs.webshop import webshop_tasks
    from milegpo.trainer import MileGPOTrainer

    bad, pages = _pages(tokenizer)
    model = scripted_model(tokenizer, f"<think> i act </think> <action> click [ {bad} ] </action>")
    model.generation_config.use_cache = False
    tasks = webshop_tasks("train", 4, catalog_size=30, test_goals=10, horizon=4)
    args = MileGPOConfig(output_dir=str(tmp_path / "out"), report_to="none", bf16=False, use_cpu=True, max_steps=1,
                         env="webshop", groups_per_iteration=2, group_size=2, num_train_tasks=4,
                         max_completion_length=24, num_eval_tasks=0, activation_checkpointing=False, save_strategy="no",
                         dataloader_num_workers=0, constrain_actions=True, num_env_workers=0, beta=0.0,
                         env_options={"catalog_size": 30, "test_goals": 10})
    trainer = MileGPOTrainer(model, args=args, processing_class=tokenizer, train_tasks=tasks, eval_tasks={})
    try:
        prompts = [[{"role": "user", "content": "shop"}]] * len(pages)
        for admissible, valid in ((None, False), (pages, True)):
            _, _, _, texts = trainer.generate_texts(prompts, admissible)
            assert [parse_action(t, a).valid for t, a in zip(texts, pages)] == [valid] * len(pages), texts
        words = goal_words(_goal(tokenizer))  # constrain_query: the search row's query of the goal's words
        _, _, _, texts = trainer.generate_texts(prompts, pages, [words] * len(pages))
        assert all(parse_action(t, a).valid for t, a in zip(texts, pages)) and _query_of_words(tokenizer, texts[2],
                                                                                             words), texts
        assert "generate" not in vars(trainer.model)  # the class's generate again after the call
    finally:
        trainer.close()

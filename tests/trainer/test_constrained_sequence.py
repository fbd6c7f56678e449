"""constrained_sampling='sequence': each admissible action drawn by its whole probability under the model.

The scorer (:class:`milegpo.trainer.constrained.SequenceScorer`) is checked against each sequence teacher-forced
alone; the draw against the scores' softmax; and the point of the rule on a scripted policy that likes ``take`` but,
after it, only an object that is not in view: token by token it takes something anyway, by sequence it goes on.
"""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from milegpo.trainer.constrained import ConstraintError, SequenceScorer, allowed_tokens_fn

torch.set_num_threads(1)

#: a household state where the goal's object (a cellphone) is not in view: two takes of other objects are admissible
ADMISSIBLE = ["examine sidetable 1", "go to drawer 1", "go to shelf 1", "take laptop 1 from sidetable 1",
              "take pen 1 from sidetable 1", "look"]


@pytest.fixture(scope="module")
def tok():
    from milegpo.job.policy import make_tokenizer

    return make_tokenizer(n_tasks=40, max_receptacles=4)


def tiny_model(tok, cls=Qwen2ForCausalLM, seed=0):
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=None)
    return cls(cfg).eval()


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 0.4])
def test_the_scorer_is_each_sequence_teacher_forced_alone(tok, temperature, cached):
    model = tiny_model(tok)
    if not cached:  # a model that keeps no key-value cache: each continuation after the whole prefix
        model.config.use_cache = False
        model.forward = functools.partial(_no_cache, model.forward)
    prefix = _ids(tok, "Task: look at cellphone under the desklamp. <think> i act </think> <action>")
    conts = [_ids(tok, f" {a} </action>") for a in ADMISSIBLE]
    eos = [tok.eos_token_id, tok.pad_token_id]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated name of the cache
        got = SequenceScorer(model, temperature)(prefix, conts, eos)
    for i, c in enumerate(conts):  # one unpadded forward pass per sequence, summed in double precision
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([prefix + c])).logits[0].double() / temperature, -1)
        n = len(prefix)
        want = sum(float(logp[n - 1 + j, t]) for j, t in enumerate(c)) + math.log(
            sum(math.exp(float(logp[n - 1 + len(c), e])) for e in eos))
        assert abs(float(got[i]) - want) < 1e-4, (ADMISSIBLE[i], float(got[i]), want)


@pytest.mark.parametrize("cached", [True, False])
def test_scoring_many_rows_at_once_is_scoring_each_alone(tok, cached, monkeypatch):
    """score_many: rows of several prefix lengths and numbers of actions, in passes of a few rows (a small
    LOGITS_PER_PASS), give each row's scores as scoring it alone does, to float rounding."""
    model = tiny_model(tok)
    if not cached:
        model.config.use_cache = False
        model.forward = functools.partial(_no_cache, model.forward)
    scorer = SequenceScorer(model, 0.7)
    prefixes = [_ids(tok, f"Task: look at {o} under the desklamp. <action>") for o in ("cellphone", "pen", "laptop")]
    prefixes += [prefixes[0], _ids(tok, "Task: look at pen under the desklamp. You see a pen 1. <action>")]
    conts = [[_ids(tok, f" {a} </action>") for a in ADMISSIBLE[i:]] for i in range(len(prefixes))]
    eos = [tok.eos_token_id, tok.pad_token_id]
    assert len({len(p) for p in prefixes}) > 1
    alone = [scorer(p, c, eos) for p, c in zip(prefixes, conts)]
    for budget in (SequenceScorer.LOGITS_PER_PASS, 1, 20 * len(tok) * 12):  # one pass a length, a row a pass, a few
        monkeypatch.setattr(SequenceScorer, "LOGITS_PER_PASS", budget)
        many = scorer.score_many(prefixes, conts, eos)
        assert [len(m) for m in many] == [len(c) for c in conts]
        for m, a in zip(many, alone):
            torch.testing.assert_close(m, a, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="score_many: 2 prefixes for 1 lists of continuations"):
        scorer.score_many(prefixes[:2], conts[:1], eos)


@pytest.mark.parametrize("cached", [True, False])
def test_the_scorer_asks_only_for_the_logits_it_reads(tok, cached):
    """Where the model's forward takes ``logits_to_keep``, the prefix pass asks for its last position's logits only
    (without a cache, the whole pass for the continuations' positions only); a forward that only takes ``**kwargs``
    is not asked. Both give the same scores."""
    model = tiny_model(tok)
    real, asked = model.forward, []

    def keeping(input_ids=None, attention_mask=None, position_ids=None, use_cache=None, logits_to_keep=0, **kw):
        asked.append(logits_to_keep)
        return real(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                    use_cache=use_cache and cached, logits_to_keep=logits_to_keep, **kw)

    def every_position(**kw):
        kw["use_cache"] = kw.get("use_cache") and cached
        return real(**kw)

    prefixes = [_ids(tok, f"Task: look at {o} under the desklamp. <action>") for o in ("cellphone", "pen")]
    conts = [[_ids(tok, f" {a} </action>") for a in ADMISSIBLE[i:]] for i in range(2)]
    eos = [tok.eos_token_id, tok.pad_token_id]
    model.forward = every_position
    whole = SequenceScorer(model).score_many(prefixes, conts, eos)
    model.forward = keeping
    kept = SequenceScorer(model).score_many(prefixes, conts, eos)
    longest = max(len(c) for row in conts for c in row)
    assert asked == ([1, 0] if cached else [1, longest]), asked
    for k, w in zip(kept, whole):
        torch.testing.assert_close(k, w, atol=1e-5, rtol=0)


class OneRowAtATime:
    """A scorer without score_many: the constraint scores each row alone, as it did before batching."""

    def __init__(self, scorer):
        self.scorer, self.calls = scorer, 0

    def __call__(self, prefix, continuations, eos):
        self.calls += 1
        return self.scorer(prefix, continuations, eos)


def test_rows_opening_their_block_together_are_scored_together_and_draw_as_alone(tok):
    """Generate calls the rows in turn, one token each a step: the rows that open ``<action>`` at the same step after
    the same text are scored in one score_many call, each drawing what it draws when scored alone (the same seed,
    the same actions); a row whose text differs is scored alone when its block opens."""
    model = tiny_model(tok, seed=3)
    prompts = [_ids(tok, f"Task: look at {o} under the desklamp. You see a laptop 1, a pen 1.")
               for o in ("cellphone", "pen", "laptop", "cellphone", "pen")]
    admissible = [ADMISSIBLE[i:] for i in range(5)]
    thought = _ids(tok, "<think> i act </think> <action>")
    scripts = [thought] * 4 + [_ids(tok, "<think> i go </think> <action>")]  # row 4 thinks otherwise
    assert len(scripts[4]) == len(thought) and scripts[4] != thought

    def drive(scorer):
        torch.manual_seed(5)
        fn = allowed_tokens_fn(tok, [tok.eos_token_id], admissible, 24, scorer=scorer, prompts=prompts)
        rows = [list(p) for p in prompts]
        written = [[] for _ in prompts]
        for step in range(24):  # as generate does: every row once a step, in order
            for i in range(5):
                allowed = fn(i, torch.tensor(rows[i]))
                if step < len(scripts[i]):
                    assert scripts[i][step] in allowed
                    rows[i].append(scripts[i][step])
                elif not set(allowed) <= {tok.eos_token_id}:
                    assert len(allowed) == 1
                    rows[i].append(allowed[0])
                    written[i].append(allowed[0])
        return [tok.decode(w).replace("</action>", "").strip() for w in written]

    alone = OneRowAtATime(SequenceScorer(model))
    together = SequenceScorer(model)
    calls = []
    original = together.score_many
    together.score_many = lambda prefixes, *rest: calls.append(len(prefixes)) or original(prefixes, *rest)
    want, got = drive(alone), drive(together)
    assert got == want and all(a in adm for a, adm in zip(got, admissible)), (got, want)
    assert alone.calls == 5
    assert calls == [4, 1]  # row 0 opens with rows 1-3 one token behind on the same text; row 4 alone


def _no_cache(forward, **kw):
    kw["use_cache"] = False
    return forward(**kw)


class FixedScores:
    """A scorer that gives each continuation a fixed log-probability by its position in the row's list."""

    def __init__(self, probs):
        self.scores = torch.tensor(probs).log()

    def __call__(self, prefix, continuations, eos):
        assert len(continuations) == len(self.scores)
        return self.scores


def _drive(fn, prompt, tok):
    """Open the action block after ``prompt`` and follow the constraint to EOS: the action written (each step must
    allow exactly one token under ``sequence``)."""
    ids, written = list(prompt), []
    fn(0, torch.tensor(ids))  # a row's first call sees its prompt only
    for t in _ids(tok, "<think> i act </think> <action>"):  # the free text, then the tag
        assert t in fn(0, torch.tensor(ids))
        ids.append(t)
    while True:
        allowed = fn(0, torch.tensor(ids))
        if set(allowed) <= {tok.eos_token_id}:
            return tok.decode(written).replace("</action>", "").strip()
        assert len(allowed) == 1, allowed
        ids.append(allowed[0])
        written.append(allowed[0])


def test_the_draw_follows_the_scores(tok):
    probs = [0.05, 0.1, 0.45, 0.3, 0.05, 0.05]
    prompt = _ids(tok, "Task: look at cellphone under the desklamp.")
    torch.manual_seed(0)
    counts = dict.fromkeys(ADMISSIBLE, 0)
    n = 2000
    for _ in range(n):
        fn = allowed_tokens_fn(tok, [tok.eos_token_id], [ADMISSIBLE], 24, scorer=FixedScores(probs), prompts=[prompt])
        counts[_drive(fn, prompt, tok)] += 1
    for action, p in zip(ADMISSIBLE, probs):  # 4.5 standard errors at most
        assert abs(counts[action] / n - p) < 4.5 * math.sqrt(p * (1 - p) / n), (action, counts[action] / n, p)


class TakeLover(Qwen2ForCausalLM):
    """Likes ``take`` after ``<action>`` (+4), and after ``take`` only the goal's object, ``cellphone`` (+12),
    which is not in view; everything else as the random tiny model has it."""

    take = cellphone = open_id = -1

    def forward(self, input_ids=None, **kw):
        out = super().forward(input_ids=input_ids, **kw)
        logits = out.logits.clone()
        ids = input_ids
        logits[..., self.take] += torch.where(ids == self.open_id, 4.0, 0.0)
        logits[..., self.cellphone] += torch.where(ids == self.take, 12.0, 0.0)
        out.logits = logits
        return out


def test_sequence_goes_on_where_token_by_token_takes_what_is_in_view(tok):
    model = tiny_model(tok, TakeLover)
    model.take, model.cellphone = tok.convert_tokens_to_ids("take"), tok.convert_tokens_to_ids("cellphone")
    model.open_id = tok.convert_tokens_to_ids("<action>")
    assert -1 not in (model.take, model.cellphone, model.open_id) and tok.unk_token_id not in (model.take,
                                                                                                model.cellphone)
    prompt = _ids(tok, "Task: look at cellphone under the desklamp. On the sidetable 1, you see a laptop 1, a pen 1.")
    batch = torch.tensor([prompt] * 64)
    takes = {}
    for rule in ("token", "sequence"):
        torch.manual_seed(1)
        scorer = SequenceScorer(model) if rule == "sequence" else None
        fn = allowed_tokens_fn(tok, [tok.eos_token_id], [ADMISSIBLE] * 64, 24, scorer=scorer, prompts=[prompt] * 64)
        with torch.no_grad():
            out = model.generate(input_ids=batch, attention_mask=torch.ones_like(batch), max_new_tokens=24,
                                 do_sample=True, temperature=1.0, top_k=0, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id, use_cache=False, prefix_allowed_tokens_fn=fn)
        texts = [tok.decode(row[len(prompt):]) for row in out]
        actions = [t.split("<action>")[-1].split("</action>")[0].strip() for t in texts]
        assert all(a in ADMISSIBLE for a in actions), actions
        takes[rule] = sum(a.startswith("take") for a in actions) / len(actions)
    assert takes["token"] > 0.7 and takes["sequence"] < 0.1, takes


def test_a_template_action_is_refused_under_sequence(tok):
    with pytest.raises(ConstraintError, match=r"constrained_sampling='sequence': the admissible action "
                                              r"'search\[<your query>\]' is a template"):
        allowed_tokens_fn(tok, [tok.eos_token_id], [["search[<your query>]", "look"]], 24,
                          scorer=FixedScores([0.5, 0.5]), prompts=[[1, 2]])
    with pytest.raises(ValueError, match="needs each row's prompt ids: none for 1 rows"):
        allowed_tokens_fn(tok, [tok.eos_token_id], [["look"]], 24, scorer=FixedScores([1.0]))


@pytest.mark.slow
def test_the_trainer_draws_whole_actions(tmp_path, tok):
    """MileGPOTrainer(constrained_sampling='sequence') through TRL's transformers generation: the scripted take-lover
    goes on where the goal's object is not in view (token by token it takes), every action admissible, and the
    rule is recorded with a saved policy's task settings."""
    from milegpo.envs import household_tasks
    from milegpo.job.policy import reload_tokenizer
    from milegpo.rollout import parse_action
    from milegpo.trainer import MileGPOTrainer
    from milegpo.trainer.config import MileGPOConfig
    from milegpo.trainer.saved_policy import recorded_task_settings

    tok.save_pretrained(tmp_path / "tok")
    tokenizer = reload_tokenizer(str(tmp_path / "tok"))
    model = tiny_model(tokenizer, TakeLover)
    model.take, model.cellphone = tokenizer.convert_tokens_to_ids("take"), tokenizer.convert_tokens_to_ids("cellphone")
    model.open_id = tokenizer.convert_tokens_to_ids("<action>")
    model.generation_config.use_cache = False
    state = "Task: look at cellphone under the desklamp. You see a laptop 1, a pen 1."
    prompts = [[{"role": "user", "content": state}]] * 32
    takes = {}
    for rule in ("token", "sequence"):
        args = MileGPOConfig(output_dir=str(tmp_path / rule), report_to="none", bf16=False, use_cpu=True, max_steps=1,
                             groups_per_iteration=2, group_size=2, num_train_tasks=4, max_completion_length=24,
                             num_eval_tasks=0, activation_checkpointing=False, save_strategy="no",
                             dataloader_num_workers=0, constrain_actions=True, constrained_sampling=rule,
                             num_env_workers=0, beta=0.0, seed=3)
        trainer = MileGPOTrainer(model, args=args, processing_class=tokenizer, train_tasks=household_tasks("train", 4),
                                 eval_tasks={})
        try:
            _, _, _, texts = trainer.generate_texts(prompts, [ADMISSIBLE] * len(prompts))
        finally:
            trainer.close()
        parsed = [parse_action(t, ADMISSIBLE) for t in texts]
        assert all(p.valid for p in parsed), texts
        takes[rule] = sum(p.action.startswith("take") for p in parsed) / len(parsed)
        assert recorded_task_settings(args)["constrained_sampling"] == rule
    assert takes["token"] > 0.7 and takes["sequence"] < 0.1, takes

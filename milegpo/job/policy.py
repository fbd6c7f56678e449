"""The policy of a run: the given model or a tiny one built on the spot, and its SFT warm start.

:func:`load_policy` returns the model of ``--model_name_or_path`` or, when none is given, the embedded
default; nothing is downloaded: :func:`make_tokenizer` trains a WordLevel tokenizer on texts of the run's
world (:data:`TOKENIZER_TEXTS`: the expert's walkthrough prompts, every word the world can show, and the
admissible actions that become one token each, so a tiny model learns to copy an action from the prompt)
and :func:`make_model` builds a 2-layer Qwen2 from a config.
:func:`warm_start` (the job's step) runs :func:`sft_warm_start`, TRL's ``SFTTrainer`` on expert
walkthroughs (prompt -> ``<think>...</think> <action>a</action>``), so the policy emits valid actions and
wins some games before reinforcement learning starts, and saves the policy where the trainer loads it;
:func:`reload_tokenizer` (:mod:`milegpo.trainer.saved_policy`) loads a saved tokenizer back faithfully.

Every environment plays the same way here: its expert is :meth:`milegpo.envs.TextEnv.expert` (``"search"``:
acts on what it has observed, e.g. the household world's :meth:`~milegpo.envs.HouseholdEnv.search_action` or
WebShop's :class:`~milegpo.envs.webshop.ShoppingExpert`; ``"oracle"``: reads the hidden state), and the only
per-world code is :data:`TOKENIZER_TEXTS` (what words the world has, which actions are phrases); any other text
environment (a user's class, a gymnasium id) gets a tokenizer of the words it shows while a few seeded episodes
are played with its admissible actions (:func:`played_texts`), and a world without an expert has no warm start.

The warm start works for any causal LM with a chat template (a real model included): the dataset is
conversational prompt-completion, so ``SFTTrainer`` applies the model's own chat template and trains
on the completion tokens only.
"""

from __future__ import annotations

import dataclasses
import random
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from ..envs import NOTHING_HAPPENS, Task, household_tasks, make_env
from ..envs.base import EnvFailure, failure_line
from ..envs.household import household_words
from ..rollout import make_tasks, render_prompt
from ..rollout.prompt import shown_actions
from ..trainer.saved_policy import reload_tokenizer, saved_task_settings  # re-exported
from .arguments import JobArguments

SPECIAL = ["<pad>", "<unk>", "<|endoftext|>", "<|user|>", "<|assistant|>"]
TAGS = ["<think>", "</think>", "<action>", "</action>"]
#: user turns as ``<|user|> text``; an assistant turn as ``<|assistant|> text <|endoftext|>`` (so that the
#: prompt rendered with ``add_generation_prompt`` is a prefix of prompt + completion, as SFTTrainer needs)
CHAT_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'assistant' %}<|assistant|> {{ m['content'] }} "
                 "<|endoftext|> {% else %}<|user|> {{ m['content'] }} {% endif %}{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")
THOUGHT = "<think> i act </think>"
#: the task type of the embedded CPU default (ALFWorld's shortest: find an object, take it to a lamp, use it)
EASY_TASK_TYPE = "look_at_obj_in_light"


def completion_text(action: str) -> str:
    """The expert's completion for ``action``."""
    return f"{THOUGHT} <action> {action} </action>"


def easy_tasks(split: str, n: int, horizon: int = 8, start: int = 0, max_receptacles: int = 0) -> list[Task]:
    """``n`` household tasks of the embedded default's task type (rooms of at most ``max_receptacles``)."""
    return household_tasks(split, n, start=start, task_type=EASY_TASK_TYPE, horizon=horizon,
                           max_receptacles=max_receptacles)


def expert_pairs(tasks: Sequence[Task], history_length: int = 2, explore: float = 0.0,
                 seed: int = 0, expert: str = "search", prompt_style: str = "alfworld",
                 show_context: bool = True) -> list[tuple[str, str]]:
    """(prompt text, expert completion text) for every step of an episode of each task; the prompt is the
    rollout's (:func:`milegpo.rollout.render_prompt` of ``prompt_style``, with the state tracker's context line
    after the observation when ``show_context``, as a run with ``show_state_context`` shows it: a warm start on
    prompts without it learns a prompt the rollout never shows, notes/main_job.md 2026-12-04).

    expert: the world's expert of that name (:meth:`milegpo.envs.TextEnv.expert`): ``search`` acts on what it
    has observed (the household world's :meth:`~milegpo.envs.HouseholdEnv.search_action`, WebShop's shopping
    expert) or ``oracle`` (knows the hidden state, e.g. where every household object is: a policy that imitates
    it learns choices its prompt gives no reason for).
    explore: probability of playing a random admissible action instead of the expert's (the expert's
    action is still the label): the policy also sees off-walkthrough states and how to recover from them.
    Episodes end at a win, a loss (WebShop: a purchase that is not the goal), or after ``task.horizon + 10``
    steps."""
    return [(prompt, completion_text(label)) for _, prompt, label, _ in
            expert_steps(tasks, history_length, explore, seed, expert, prompt_style, show_context)]


def expert_steps(tasks: Sequence[Task], history_length: int = 2, explore: float = 0.0,
                 seed: int = 0, expert: str = "search", prompt_style: str = "alfworld", show_context: bool = True):
    """The steps :func:`expert_pairs` records, as ``(env, prompt, label, admissible)``: the environment in the state
    the prompt shows (yielded before the step is played; one environment per kind, reset per task), the expert's
    action and the admissible actions."""
    rng = random.Random(seed)
    envs: dict[str, Any] = {}  # one environment per kind, reset per task (an engine's start is paid once)
    try:
        for task in tasks:
            if task.env not in envs:
                envs[task.env] = make_env(task.env)
            env = envs[task.env]
            act = env.expert(expert)
            obs, adm, info = env.reset(dataclasses.replace(task, horizon=task.horizon + 10))
            goal, shown = info["goal"], shown_actions(info)
            hist: list[tuple[str, str]] = []
            while not env.done:
                label = act()
                context = info.get("state_context", "") if show_context else ""
                yield env, render_prompt(goal, obs, shown, hist, len(hist), history_length, prompt_style,
                                         context=context), label, adm
                a = rng.choice(adm) if explore and adm and rng.random() < explore else label
                hist.append((obs, a))
                obs, _, _, _, info = env.step(a)
                adm, shown = info["admissible_actions"], shown_actions(info)
    finally:
        for env in envs.values():
            env.close()


def met_actions(tasks: Sequence[Task]) -> set[str]:
    """Every admissible action that any expert of the world (:attr:`milegpo.envs.TextEnv.experts`) meets while
    playing each of ``tasks`` to its end."""
    out: set[str] = set()
    for task in tasks:
        for expert in make_env(task.env).experts:
            env = make_env(task.env)
            act = env.expert(expert)
            _, adm, _ = env.reset(task)
            out.update(adm)
            while not env.done:
                _, _, _, _, info = env.step(act())
                out.update(info["admissible_actions"])
    return out


# ---------------------------------------------------------------------------------------------- tokenizer texts
@dataclasses.dataclass
class TokenizerTexts:
    """What a tiny tokenizer of one world is trained on: ``corpus`` (texts whose words become tokens),
    ``phrases`` (admissible actions and other texts that become one token each), ``lowercase`` (normalise case
    first) and ``lone_punctuation`` (every punctuation mark its own token, else a run of them is one)."""

    corpus: list[str]
    phrases: set[str]
    lowercase: bool = False
    lone_punctuation: bool = False


#: verbs whose admissible phrases become one token each: they name a receptacle (or the lamp), and the same
#: few phrases recur in every room. Phrases that name an object ("take apple 2 from countertop 1") stay words:
#: there are too many object x receptacle pairs for each to be learned as a token in a short warm start (64
#: walkthroughs show about a third of the evaluation games' "take" phrases), while their words are all seen.
PHRASE_VERBS = ("go", "open", "close", "use", "examine", "inventory", "look")


def household_texts(n_tasks: int, options: Mapping[str, Any]) -> TokenizerTexts:
    """The household world's: walkthrough prompts and first observations of ``n_tasks`` games of every split,
    every object / receptacle name; phrases: the admissible actions of the easy tasks (also in rooms of
    ``options["max_receptacles"]``) whose verb is one of :data:`PHRASE_VERBS`."""
    max_receptacles = int(options.get("max_receptacles", 0))
    corpus, met = [], set()
    for split in ("train", "id", "ood"):
        tasks = household_tasks(split, n_tasks, horizon=50)
        corpus += [p + " " + c for p, c in expert_pairs(tasks)]
        corpus += [make_env("household").reset(t)[0] + " " + NOTHING_HAPPENS for t in tasks]
        met |= met_actions(easy_tasks(split, n_tasks, horizon=50))
        if max_receptacles:
            met |= met_actions(easy_tasks(split, n_tasks, horizon=50, max_receptacles=max_receptacles))
        corpus += _random_play_observations(easy_tasks(split, 4, horizon=PLAYED_STEPS, max_receptacles=max_receptacles))
    corpus.append(render_prompt("goal", "now", ["a"], [("before", "act")], 1, 1, style="compact"))  # its words
    corpus.append(" ".join(household_words()))  # every object / receptacle type, whatever the games drawn
    return TokenizerTexts(corpus, {p for p in met if p.split(" ", 1)[0] in PHRASE_VERBS})


def _random_play_observations(tasks: Sequence[Task], seed: int = 0) -> list[str]:
    """What the world answers to every verb: the observations of each task played to its end by random admissible
    actions (seeded). The expert never plays ``inventory``, ``look``, ``examine`` or ``close``, whose answers ("You
    are not carrying anything.", "You are facing the ...", "There's nothing special about ...") a policy meets."""
    rng, out = random.Random(seed), []
    for task in tasks:
        env = make_env(task.env)
        obs, admissible, _ = env.reset(task)
        out.append(obs)
        while not env.done:
            obs, _, _, _, info = env.step(rng.choice(admissible))
            admissible = info["admissible_actions"]
            out.append(obs)
        env.close()
    return out


def webshop_texts(n_tasks: int, options: Mapping[str, Any]) -> TokenizerTexts:
    """WebShop's (the catalog of ``options``): walkthrough prompts of (up to) ``n_tasks`` goals of each split in every
    prompt style, and every page a product has (its results entry, item page and sub-pages, as the env renders
    them) and every goal's instruction, lower-cased, each punctuation mark a token; phrases: the separator
    ``[SEP]``, the buttons and every option value of the catalog (``click[buy now]``, ``click[navy blue]``); a
    product's ``click[<asin>]`` stays four tokens (``click``, ``[``, the ASIN, the token of the ASIN on the
    results page too, ``]``)."""
    from ..envs.webshop.env import WORLD_OPTIONS, get_world, world_options
    from ..envs.webshop.pages import BACK_TO_SEARCH, END_BUTTON, NEXT_PAGE, PREV_PAGE, SEP, SUB_PAGES, Session, render

    world = get_world(world_options(**{k: v for k, v in options.items() if k in WORLD_OPTIONS}))
    corpus = []
    for split in ("train", "test"):
        tasks = make_tasks("webshop", split, None, horizon=50, options=dict(options))[:n_tasks]  # a split may be small
        corpus += [p + " " + c for style in ("webshop", "compact", "alfworld")
                   for p, c in expert_pairs(tasks, prompt_style=style)]
    by_asin, values = world.shop.by_asin, set()
    for product in world.shop.products:
        values.update(v for vs in product["options"].values() for v in vs)
        corpus.append(product["asin"])
        for page, sub_page in (("item", ""), *(("sub", sub) for sub in SUB_PAGES)):
            session = Session(page=page, asin=product["asin"], sub_page=sub_page)
            corpus.append(render(session, "", by_asin, show_attrs=True).observation)
    corpus += [goal["instruction_text"] for goal in world.shop.goals]
    phrases = {SEP.strip().lower()} | {f"click[{t.lower()}]" for t in
                                       {BACK_TO_SEARCH, END_BUTTON, NEXT_PAGE, PREV_PAGE, *SUB_PAGES} | values}
    return TokenizerTexts(corpus, phrases, lowercase=True, lone_punctuation=True)


#: ScienceWorld's short task types (5-10 gold steps), whose walkthroughs scienceworld_texts plays
SCIENCEWORLD_SHORT_TYPES = ("find-animal", "find-living-thing", "find-non-living-thing", "find-plant",
                            "lifespan-longest-lived", "lifespan-longest-lived-then-shortest-lived",
                            "lifespan-shortest-lived")


def scienceworld_texts(n_tasks: int, options: Mapping[str, Any]) -> TokenizerTexts:
    """ScienceWorld's (with the simplifications of ``options``): the first state of the first variation of every
    task type in each split (its observation, goal, prompt actions, every admissible action), the gold expert's
    walkthrough prompts of ``min(n_tasks, 2)`` variations per split of the short task types
    (:data:`SCIENCEWORLD_SHORT_TYPES`), the words of the prompt templates and of the engine's object class names
    (``BlueJay`` -> "blue jay"); phrases: every object the prompts name (``OBJ is one of: a | b``), one token each,
    so that a policy copies an object from its prompt as one token. 90 resets and 42 short gold episodes: 2-3
    minutes on 2 busy cores (notes/scienceworld.md)."""
    import re
    from importlib.resources import files

    from ..envs.scienceworld import SPLITS, TASK_TYPES, scienceworld_tasks
    from ..envs.scienceworld.actions import OBJECTS_PREFIX

    simplifications = str(options.get("simplifications", ""))
    corpus: list[str] = []
    objects: set[str] = set()

    def shown(info: dict) -> None:
        for entry in info.get("prompt_actions", ()):
            if entry.startswith(OBJECTS_PREFIX):
                objects.update(o.strip() for o in entry[len(OBJECTS_PREFIX):].split(" | ") if " " in o.strip())

    env = make_env("scienceworld")
    try:
        for split in SPLITS:
            for task in scienceworld_tasks(split, len(TASK_TYPES), horizon=50, simplifications=simplifications):
                obs, admissible, info = env.reset(task)
                corpus += [obs, info["goal"], " ".join(info["prompt_actions"]), *admissible]
                shown(info)
    finally:
        env.close()
    k = max(1, min(n_tasks, 2))
    for split in SPLITS:
        tasks = scienceworld_tasks(split, k * len(SCIENCEWORLD_SHORT_TYPES), task_types=SCIENCEWORLD_SHORT_TYPES,
                                   horizon=30, simplifications=simplifications)
        corpus += [p + " " + c for p, c in expert_pairs(tasks, prompt_style="compact", expert="oracle")]
    corpus.append(render_prompt("goal", "now", ["a"], [("before", "act")], 1, 1, style="alfworld"))  # its words
    names = (files("scienceworld") / "object_type_ids.tsv").read_text().splitlines()
    corpus += [re.sub(r"(?<!^)(?=[A-Z])", " ", line.split("\t")[0].rsplit(".", 1)[-1]).lower() for line in names]
    corpus.append(" ".join(str(i) for i in range(100)))  # flower pot 12, terminal 2, 37 degrees
    return TokenizerTexts(corpus, objects)


#: env kind -> the texts of its world a tiny tokenizer is trained on (``fn(n_tasks, env_options)``); any other kind's
#: are :func:`played_texts`
TOKENIZER_TEXTS: dict[str, Callable[[int, Mapping[str, Any]], TokenizerTexts]] = {
    "household": household_texts, "webshop": webshop_texts, "scienceworld": scienceworld_texts}
#: :func:`played_texts`: at most this many tasks of each split are played, each for at most this many steps
PLAYED_TASKS, PLAYED_STEPS = 8, 20
#: :func:`played_texts`: at most this many admissible actions become one token each (the most frequent first)
MAX_PHRASES = 2000


def played_texts(kind: str, n_tasks: int, options: Mapping[str, Any], seed: int = 0,
                 env_errors: str = "raise") -> TokenizerTexts:
    """Any text environment's words, as the shipped worlds' texts are built: ``min(n_tasks, PLAYED_TASKS)`` seeded
    tasks of each of its splits played to their end (at most :data:`PLAYED_STEPS` steps), each step by a random
    admissible action (:meth:`~milegpo.envs.TextEnv.playable_actions`; seeded), or, where the world lists none
    (free text), by a random word of what it showed. The corpus: every goal, observation and context line, and
    the prompt of every step in every prompt style with the completion of the action played; phrases: the
    admissible actions of more than one word met, each one token (a tiny policy copies an action from the prompt's
    list), the :data:`MAX_PHRASES` most frequent. Deterministic for a given world, ``options`` and ``seed``.
    An environment that fails while it is played (its step raises) stops the run with an
    :class:`~milegpo.envs.base.EnvFailure` as a rollout does, or with ``env_errors="skip"`` ends that episode."""
    from ..envs import task_space
    from ..rollout.prompt import PROMPT_STYLES

    rng = random.Random(seed)
    corpus: list[str] = [render_prompt("goal", "now", ["a"], [("before", "act")], 1, 1, style=style)
                         for style in PROMPT_STYLES]
    met: dict[str, int] = {}
    for split in task_space(kind).splits:
        for task in make_tasks(kind, split, min(n_tasks, PLAYED_TASKS), horizon=PLAYED_STEPS, options=dict(options)):
            env = make_env(kind)
            try:
                obs, admissible, info = env.reset(task)
                goal, history = info["goal"], []
                corpus += [goal, info.get("state_context", "")]
                while not env.done:
                    for action in admissible:
                        met[action] = met.get(action, 0) + 1
                    playable = env.playable_actions(admissible)
                    action = rng.choice(playable or (goal + " " + obs).split() or ["look"])
                    corpus += [render_prompt(goal, obs, admissible, history, len(history), 2, style,
                                             info.get("state_context", "")) + " " + completion_text(action)
                               for style in PROMPT_STYLES]
                    history.append((obs, action))
                    try:
                        obs, _, _, _, info = env.step(action)
                    except Exception as e:  # noqa: BLE001 - the environment's own failure, named as a rollout does
                        if env_errors == "skip":
                            break
                        raise EnvFailure(failure_line(kind, "step", task.task_id, e, step=env.steps + 1)
                                         + " (while the tiny policy's tokenizer was made of played episodes); "
                                         "env_errors='skip' plays on", traceback.format_exc()) from None
                    admissible = info["admissible_actions"]
                corpus.append(obs)
            finally:
                env.close()
    phrases = [a for a in sorted(met, key=lambda a: (-met[a], a)) if len(a.split()) > 1][:MAX_PHRASES]
    return TokenizerTexts(corpus, set(phrases))


def tokenizer_texts(env: str, env_errors: str = "raise") -> Callable[[int, Mapping[str, Any]], TokenizerTexts]:
    """The texts a tiny tokenizer of kind ``env`` is trained on: the shipped world's own (:data:`TOKENIZER_TEXTS`),
    else its played words (:func:`played_texts`, with ``env_errors``)."""
    if env in TOKENIZER_TEXTS:
        return TOKENIZER_TEXTS[env]
    return lambda n_tasks, options: played_texts(env, n_tasks, options, env_errors=env_errors)


def make_tokenizer(n_tasks: int = 40, chat: bool = True, max_receptacles: int = 0, env: str = "household",
                   options: Mapping[str, Any] | None = None, env_errors: str = "raise"):
    """A WordLevel tokenizer trained on the texts of world ``env`` (:func:`tokenizer_texts`: :data:`TOKENIZER_TEXTS`
    for the shipped worlds, the played words of any other text environment; from ``n_tasks`` tasks per split and the
    env options ``options``), with its action phrases as one token each (household: ``go to sofa 1``, see
    :data:`PHRASE_VERBS`; WebShop: ``click[buy now]``; another world: its admissible actions), left padding, ``<|endoftext|>`` as
    EOS, the chat template above; decoding writes ``name[argument]`` without spaces at the brackets, as the
    world reads an action. ``max_receptacles`` (household): also the phrases of the easy tasks in rooms that
    small (the option of that name does the same). ``env_errors``: what a failing environment does while a world
    without texts of its own is played (:func:`played_texts`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    opts = dict(options or {})
    if max_receptacles:
        opts["max_receptacles"] = max_receptacles
    texts = tokenizer_texts(env, env_errors)(n_tasks, opts)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    if texts.lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
                         if texts.lone_punctuation else pre_tokenizers.Whitespace())
    # join tokens with spaces, then close the brackets of an action: "click [ b0x ]" -> "click[b0x]"
    tok.decoder = decoders.Sequence([decoders.WordPiece(prefix="##", cleanup=False), decoders.Fuse(),
                                     decoders.Replace(Regex(r"\s*\[\s*"), "["), decoders.Replace(Regex(r"\s*\]"), "]")])
    tok.train_from_iterator(texts.corpus, trainers.WordLevelTrainer(special_tokens=SPECIAL + TAGS, min_frequency=1))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<|endoftext|>", padding_side="left", truncation_side="left")
    fast.add_tokens(TAGS + sorted(texts.phrases))
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def make_model(tokenizer, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2, seed: int = 0):
    """A tiny Qwen2 from a config (randomly initialised; ``seed`` fixes the weights)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=4096, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = Qwen2ForCausalLM(cfg)
    _init_phrase_embeddings(model, tokenizer)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def _init_phrase_embeddings(model, tokenizer) -> None:
    """An action phrase's token ("go to sofa 1") starts as the mean of its words' embeddings (as
    ``resize_token_embeddings(mean_resizing=True)`` starts new tokens from old ones): phrases then share
    structure from the first step (all "go to" phrases alike, all "sofa" phrases alike), so learning to
    pick one phrase from the prompt's list carries over to phrases the warm start never showed."""
    emb = model.get_input_embeddings().weight
    unk = tokenizer.unk_token_id
    with torch.no_grad():
        for phrase, tid in tokenizer.get_added_vocab().items():
            words = phrase.split()
            if len(words) < 2:
                continue
            wids = [w for w in tokenizer.convert_tokens_to_ids(words) if w is not None and w != unk]
            if wids:
                emb[tid] = emb[wids].mean(0)


def sft_dataset(tasks: Sequence[Task], history_length: int = 2, explore: float = 0.2, seed: int = 0,
                expert: str = "search", prompt_style: str = "alfworld", show_context: bool = True):
    """Conversational prompt-completion dataset of expert steps (TRL's SFT format)."""
    from datasets import Dataset

    pairs = expert_pairs(tasks, history_length, explore=explore, seed=seed, expert=expert, prompt_style=prompt_style,
                         show_context=show_context)
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p, _ in pairs],
                              "completion": [[{"role": "assistant", "content": c}] for _, c in pairs]})


def sft_warm_start(model, tokenizer, tasks: Sequence[Task], output_dir: str, epochs: float = 3.0,
                   batch_size: int = 16, learning_rate: float = 3e-3, history_length: int = 2,
                   explore: float = 0.2, seed: int = 0, max_steps: int = -1, use_cpu: bool | None = None,
                   disable_tqdm: bool | None = None, expert: str = "search", prompt_style: str = "alfworld",
                   log_file=None, lr_scheduler_type: str = "constant", show_context: bool = True):
    """Supervised warm start with TRL's ``SFTTrainer`` on expert walkthroughs of ``tasks``.

    Completion-only loss (the prompt tokens are not trained on); returns the trained model (the same object)
    and the trainer's final training loss. The console shows one line per logged step
    (:func:`milegpo.job.console.sft_line`), and every logged dict goes to ``log_file`` (JSON lines) if given."""
    from .console import sft_line, use_iteration_console
    from trl import SFTConfig, SFTTrainer

    data = sft_dataset(tasks, history_length, explore=explore, seed=seed, expert=expert, prompt_style=prompt_style,
                       show_context=show_context)
    args = SFTConfig(output_dir=output_dir, num_train_epochs=epochs, max_steps=max_steps,
                     per_device_train_batch_size=batch_size, learning_rate=learning_rate, lr_scheduler_type=lr_scheduler_type,
                     warmup_steps=0, logging_steps=10, save_strategy="no", report_to="none", seed=seed,
                     bf16=False, fp16=False, max_length=None, use_cpu=bool(use_cpu) if use_cpu is not None else
                     not torch.cuda.is_available(), dataloader_num_workers=0, disable_tqdm=disable_tqdm,
                     completion_only_loss=True, activation_checkpointing=False,
                     gradient_checkpointing=None)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    use_iteration_console(trainer, log_file, line=sft_line, phase="sft")
    out = trainer.train()
    model = trainer.model
    model.eval()
    return model, float(out.training_loss), len(data)


# ---------------------------------------------------------------------------------------------- the job's steps
def load_policy(job: JobArguments, cfg) -> tuple[Any, Any, bool]:
    """(model, tokenizer, tiny?): the given model, or a tiny Qwen2 + tokenizer built on the spot."""
    if job.model_name_or_path:
        from transformers import AutoModelForCausalLM

        tok = reload_tokenizer(job.model_name_or_path)  # a saved tiny policy's tokenizer too
        model = AutoModelForCausalLM.from_pretrained(job.model_name_or_path, **(cfg.model_init_kwargs or {}))
        return model, tok, False
    tok = make_tokenizer(env=cfg.env, options=cfg.env_options, env_errors=cfg.env_errors)
    return make_model(tok, hidden=job.tiny_hidden, layers=job.tiny_layers, seed=cfg.seed), tok, True


def sft_tasks(job: JobArguments, cfg):
    """Warm-start tasks: training-split seeds after the RL training tasks (disjoint from them and from ID/OOD)."""
    return make_tasks(cfg.env, cfg.train_split, job.sft_tasks, cfg.task_type, cfg.horizon, start=cfg.num_train_tasks,
                      options=cfg.env_options)


def warm_start(job: JobArguments, cfg, model, tok, out_dir: Path, quiet: bool = False, log_file=None):
    """SFT warm start (TRL SFTTrainer) if ``job.sft_epochs > 0``; the policy is saved to ``out_dir``; its logged
    metrics go to ``log_file`` (:func:`sft_warm_start`)."""
    info: dict[str, Any] = {"sft_epochs": job.sft_epochs}
    if job.sft_epochs > 0:
        t0 = time.perf_counter()
        model, loss, n = sft_warm_start(model, tok, sft_tasks(job, cfg), str(out_dir / "sft_trainer"),
                                        epochs=job.sft_epochs, batch_size=job.sft_batch_size,
                                        learning_rate=job.sft_learning_rate, history_length=cfg.history_length,
                                        explore=job.sft_explore, seed=cfg.seed, use_cpu=cfg.use_cpu,
                                        expert=job.sft_expert, prompt_style=cfg.prompt_style,
                                        show_context=cfg.show_state_context,
                                        disable_tqdm=quiet or cfg.disable_tqdm, log_file=log_file)
        info.update(sft_examples=n, sft_loss=loss, sft_s=time.perf_counter() - t0)
    # GRPOTrainer loads its reference model from the policy's path: the warm-started policy lives on disk
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return str(out_dir), info


__all__ = ["make_tokenizer", "make_model", "sft_warm_start", "sft_dataset", "expert_pairs", "expert_steps",
           "met_actions", "easy_tasks", "completion_text", "CHAT_TEMPLATE", "EASY_TASK_TYPE", "TOKENIZER_TEXTS",
           "TokenizerTexts", "household_texts", "played_texts", "tokenizer_texts", "PLAYED_TASKS", "PLAYED_STEPS",
           "MAX_PHRASES", "webshop_texts", "scienceworld_texts", "SCIENCEWORLD_SHORT_TYPES", "PHRASE_VERBS",
           "load_policy", "sft_tasks", "warm_start", "reload_tokenizer", "saved_task_settings"]

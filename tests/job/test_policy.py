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

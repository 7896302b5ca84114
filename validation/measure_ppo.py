"""Measures one PPO step as TRL 0.25.1's PPOTrainer runs it, on the CPU under PyTorch's MemTracker, as
validation/measure_grpo.py measures a GRPO step.

Dev-only: needs torch, transformers, peft, accelerate and trl 0.25.1 (PPOTrainer left ``trl.trainer`` for
``trl.experimental.ppo`` after 0.25.1, huggingface/trl#4482, and was removed altogether by huggingface/trl#7020: TRL
1.16 has none). Install it apart from the other scripts' TRL::

    python3 -m venv /tmp/trl25 && /tmp/trl25/bin/pip install torch==2.13.0 transformers peft accelerate trl==0.25.1

The step is ``PPOTrainer.train``'s loop body (trl/trainer/ppo_trainer.py@v0.25.1 L497-765) transcribed statement by
statement, every local of ``train()`` an attribute of ``frame`` so that what TRL keeps from one update to the next is
kept here too (``logitss``, which no ``del`` names, and ``query_responses``, held by the last chunk's
``query_response`` view), and TRL's own functions called where it calls them: ``batch_generation``, ``forward``,
``get_reward``, ``selective_log_softmax``, ``truncate_response``, ``first_true_indices``, ``masked_mean``,
``masked_whiten`` and ``PolicyAndValueWrapper``. Models as trl/examples/scripts/ppo/ppo.py makes them: the policy a
causal LM; the value and the reward model the same backbone as ``AutoModelForSequenceClassification`` with
``num_labels=1``; the reference a ``create_reference_model`` copy of a full policy, none for a PEFT policy (its adapters
disabled, ``null_ref_context``). PPOConfig 0.25.1's defaults where a case names nothing: ``num_ppo_epochs`` 4 (run as 1
here: every epoch repeats the same mini-batches, freed at each mini-batch's end), ``num_mini_batches`` 1,
``local_rollout_forward_batch_size`` 64, ``response_length`` 53, ``temperature`` 0.7, no stop token (every response
runs to response_length).

- amp-bf16 (OnPolicyConfig's bf16=True on fp32 weights): accelerate's prepare_model wraps PolicyAndValueWrapper's
  forward in autocast; the rollout and the scoring passes call the inner models directly, in fp32.
- gradient checkpointing (``gc`` cases): PPOTrainer never enables it (OnPolicyConfig's gradient_checkpointing is read
  only by Trainer.train, which PPOTrainer.train replaces); a policy given with it enabled fails in 0.25.1
  (unwrap_model_for_generation calls PolicyAndValueWrapper.gradient_checkpointing_disable, which it lacks:
  huggingface/trl#4954). These cases enable it on the policy and give the wrapper the two methods huggingface/trl#5245
  added (they turn the policy's checkpointing off for generate() and on again), the value model unchanged.

CUDA-like allocation as validation/measure_grpo.py sets it up (512-byte rounding, CUDA's autocast lists). Three steps
run: the first, untracked, makes the optimizer state; the second, tracked, leaves what TRL leaves for the next update;
the third is recorded, phase by phase.

Usage:
    /tmp/trl25/bin/python validation/measure_ppo.py                 # every case -> validation/measured_ppo.partial.jsonl
    /tmp/trl25/bin/python validation/measure_ppo.py --only lora     # the cases whose label says lora
    /tmp/trl25/bin/python validation/measure_ppo.py --write         # validation/measured_ppo.json from the cases finished
"""

import argparse
import contextlib
import json
import os
import sys
import time
import types

import numpy as np
import torch
from torch.distributed._tools.mem_tracker import MemTracker

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
from measure_grpo import ROOT, accelerate_autocast  # noqa: E402  (puts the repository and validation/ on the path)
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
from measure_dpo import Phases  # noqa: E402

OUT = ROOT / "validation" / "measured_ppo.json"
PARTIAL = ROOT / "validation" / "measured_ppo.partial.jsonl"

LLAMA = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000")
QWEN = dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000")

PPO_KEYS = ("response_length", "local_rollout_forward_batch_size", "num_mini_batches")
PAD = 0
TEMPERATURE = 0.7       # OnPolicyConfig.temperature default


def case(model, method, precision, recompute, batch, prompt, response, ga=1, mini=1, chunk=64, **extra):
    return dict(**model, method=method, precision=precision, recompute=recompute, batch=str(batch), seq=str(prompt),
                response_length=str(response), microbatches=str(ga), num_mini_batches=str(mini),
                local_rollout_forward_batch_size=str(chunk), **extra)


# (label, pycore inputs). batch is per_device_train_batch_size, microbatches gradient_accumulation_steps (the rollout
# generates batch × microbatches rows, local_batch_size), seq the prompt's tokens.
CASES = [
    ("llama small ppo full bf16 b8 p64 r128", case(LLAMA, "ppo", "bf16", "none", 8, 64, 128)),
    ("llama small ppo full amp-bf16 b4 p64 r128", case(LLAMA, "ppo", "amp-bf16", "none", 4, 64, 128)),
    ("llama small ppo full bf16 gc b8 p64 r192", case(LLAMA, "ppo", "bf16", "full", 8, 64, 192)),
    ("llama small ppo full bf16 b2 ga4 mb2 chunk4 p64 r128", case(LLAMA, "ppo", "bf16", "none", 2, 64, 128, ga=4,
                                                                  mini=2, chunk=4)),
    ("llama small ppo lora qv bf16 b8 p64 r128", case(LLAMA, "ppo-lora", "bf16", "none", 8, 64, 128,
                                                      lora_targets="qv")),
    ("llama small ppo lora all-linear amp-bf16 gc b4 p64 r128", case(LLAMA, "ppo-lora", "amp-bf16", "full", 4, 64, 128,
                                                                     lora_targets="all-linear")),
    ("llama small ppo lora qv bf16 b4 ga2 chunk2 p64 r192", case(LLAMA, "ppo-lora", "bf16", "none", 4, 64, 192, ga=2,
                                                                 chunk=2, lora_targets="qv")),
    ("qwen small ppo full bf16 b8 p32 r128", case(QWEN, "ppo", "bf16", "none", 8, 32, 128)),
    ("qwen small ppo full amp-bf16 b4 ga2 p64 r128", case(QWEN, "ppo", "amp-bf16", "none", 4, 64, 128, ga=2)),
    ("qwen small ppo full bf16 gc b4 ga2 p64 r96", case(QWEN, "ppo", "bf16", "full", 4, 64, 96, ga=2)),
    ("qwen small ppo lora attention bf16 b4 p64 r192", case(QWEN, "ppo-lora", "bf16", "none", 4, 64, 192,
                                                            lora_targets="attention")),
]


def policy_method(inputs):
    return {"ppo": "full", "ppo-lora": "lora"}[inputs["method"]]


def classifier(values, arch):
    """The value or reward model: the policy's backbone as AutoModelForSequenceClassification, num_labels=1
    (trl/examples/scripts/ppo/ppo.py), in the policy's weight dtype."""
    import transformers

    config = measure.hf_config(arch, values["attention"], values["model"])
    config.num_labels = 1
    config.pad_token_id = PAD
    dtype = measure.DTYPES.get(values["precision"][:4], torch.float32)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return getattr(transformers, arch.hf_class.replace("ForCausalLM", "ForSequenceClassification"))(config)
    finally:
        torch.set_default_dtype(previous)


def build(inputs):
    """Policy, value, reward and reference models and the wrapper, as PPOTrainer.__init__ makes them (L241-316)."""
    from trl.models import create_reference_model
    from trl.trainer.ppo_trainer import PolicyAndValueWrapper
    from trl.trainer.utils import disable_dropout_in_model

    plain = {k: v for k, v in inputs.items() if k not in PPO_KEYS} | {"method": policy_method(inputs)}
    values, arch, policy = measure.build(plain)
    # a checkpoint's config keeps use_cache=True, which generate() follows (measure.hf_config turns it off)
    policy.config.use_cache = True
    policy.generation_config.use_cache = True
    policy.generation_config.eos_token_id = None        # PPOTrainer.__init__ L231: stop_token_id None
    value_model, reward_model = classifier(values, arch), classifier(values, arch)
    ref = None
    if plain["method"] == "full":
        ref = create_reference_model(policy)             # L265: a frozen deepcopy, in eval mode
    else:
        policy = measure.with_lora(policy, values)       # L252: get_peft_model
    for module in (policy, ref, value_model, reward_model):
        if module is not None:
            disable_dropout_in_model(module)
    if values["recompute"] == "full":
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if plain["method"] == "lora":
            policy.enable_input_require_grads()
    model = PolicyAndValueWrapper(policy, value_model)
    # huggingface/trl#5245's methods, without which a checkpointed policy fails at generate() (huggingface/trl#4954)
    model.gradient_checkpointing_disable = lambda: (policy.gradient_checkpointing_disable(),
                                                    setattr(model, "is_gradient_checkpointing", False))
    model.gradient_checkpointing_enable = lambda **kw: (policy.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False}), setattr(model, "is_gradient_checkpointing", True))
    if values["precision"].startswith("amp-"):
        accelerate_autocast(model)                       # accelerator.prepare(self.model) under bf16=True
    model.train()
    return values, arch, model, ref, reward_model


def trainer(values, inputs, model, ref, reward_model, optimizer):
    """What PPOTrainer.__init__ derives (L281-292) and what train() reads."""
    from accelerate import Accelerator

    ga, mini = values["microbatches"], int(inputs["num_mini_batches"])
    local_batch = values["batch"] * ga
    args = types.SimpleNamespace(
        per_device_train_batch_size=values["batch"], gradient_accumulation_steps=ga, num_mini_batches=mini,
        local_batch_size=local_batch, local_mini_batch_size=local_batch // mini, num_ppo_epochs=1,
        local_rollout_forward_batch_size=int(inputs["local_rollout_forward_batch_size"]),
        response_length=int(inputs["response_length"]), temperature=TEMPERATURE, kl_coef=0.05, kl_estimator="k1",
        cliprange=0.2, vf_coef=0.1, cliprange_value=0.2, gamma=1.0, lam=0.95, whiten_rewards=False,
        missing_eos_penalty=None, ds3_gather_for_generation=True)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ga)
    return types.SimpleNamespace(args=args, accelerator=accelerator, model=model, ref_model=ref,
                                 reward_model=reward_model, optimizer=accelerator.prepare_optimizer(optimizer),
                                 stop_token_id=None, is_peft_model=ref is None)


def rollout(ppo, f, mark):
    """train() L500-622: generation, then each chunk's log-probs, reference, value and reward passes, then GAE."""
    from trl.models.utils import unwrap_model_for_generation
    from trl.trainer.ppo_trainer import INVALID_LOGPROB, masked_whiten
    from trl.trainer.utils import batch_generation, first_true_indices, forward, get_reward, selective_log_softmax
    from transformers import GenerationConfig

    args, model, device = ppo.args, ppo.model, "cpu"
    generation_config = GenerationConfig(max_new_tokens=args.response_length, temperature=(args.temperature + 1e-7),
                                         top_k=0.0, top_p=1.0, do_sample=True)
    with torch.no_grad():
        f.queries = f.data["input_ids"].to(device)
        f.context_length = f.queries.shape[1]
        f.responses, f.postprocessed_responses, f.logprobs, f.ref_logprobs = [], [], [], []
        f.scores, f.sequence_lengths, f.values = [], [], []
        with unwrap_model_for_generation(model, ppo.accelerator) as f.unwrapped_model:
            f.query_responses, f.logitss = batch_generation(f.unwrapped_model.policy, f.queries,
                                                            args.local_rollout_forward_batch_size, PAD,
                                                            generation_config)
        mark("rollout, logits padded")
        for i in range(0, f.queries.shape[0], args.local_rollout_forward_batch_size):
            f.query = f.queries[i: i + args.local_rollout_forward_batch_size]
            f.query_response = f.query_responses[i: i + args.local_rollout_forward_batch_size]
            f.response = f.query_response[:, f.context_length:]
            f.logits = f.logitss[i: i + args.local_rollout_forward_batch_size]
            f.logprob = selective_log_softmax(f.logits, f.response)
            del f.logits
            if ppo.ref_model is None:
                with model.policy.disable_adapter():                 # null_ref_context
                    f.ref_output = forward(model.policy, f.query_response, PAD)
            else:
                f.ref_output = forward(ppo.ref_model, f.query_response, PAD)
            f.ref_logits = f.ref_output.logits[:, f.context_length - 1: -1]
            f.ref_logits /= args.temperature + 1e-7
            f.ref_logprob = selective_log_softmax(f.ref_logits, f.response)
            del f.ref_output, f.ref_logits
            mark("reference log-probs")
            f.postprocessed_response = f.response
            f.postprocessed_query_response = torch.cat((f.query, f.postprocessed_response), 1)
            f.sequence_length = first_true_indices(f.postprocessed_response == PAD) - 1
            f.unwrapped_value_model = ppo.accelerator.unwrap_model(model).value_model
            f.full_value, _, _ = get_reward(f.unwrapped_value_model, f.query_response, PAD, f.context_length)
            f.value = f.full_value[:, f.context_length - 1: -1].squeeze(-1)
            mark("value scores")
            _, f.score, _ = get_reward(ppo.reward_model, f.postprocessed_query_response, PAD, f.context_length)
            mark("reward scores")
            f.responses.append(f.response)
            f.postprocessed_responses.append(f.postprocessed_response)
            f.logprobs.append(f.logprob)
            f.ref_logprobs.append(f.ref_logprob)
            f.sequence_lengths.append(f.sequence_length)
            f.scores.append(f.score)
            f.values.append(f.value)
        for name in ("responses", "postprocessed_responses", "logprobs", "ref_logprobs", "sequence_lengths", "scores",
                     "values"):
            setattr(f, name, torch.cat(getattr(f, name), 0))
        del f.logprob, f.ref_logprob, f.full_value, f.value, f.score, f.unwrapped_model
        f.contain_eos_token = torch.any(f.postprocessed_responses == PAD, dim=-1)
        f.response_idxs = torch.arange(f.responses.shape[1], device=device).repeat(f.responses.shape[0], 1)
        f.padding_mask = f.response_idxs > f.sequence_lengths.unsqueeze(1)
        f.logprobs = torch.masked_fill(f.logprobs, f.padding_mask, INVALID_LOGPROB)
        f.ref_logprobs = torch.masked_fill(f.ref_logprobs, f.padding_mask, INVALID_LOGPROB)
        f.sequence_lengths_p1 = f.sequence_lengths + 1
        f.padding_mask_p1 = f.response_idxs > (f.sequence_lengths_p1.unsqueeze(1))
        f.values = torch.masked_fill(f.values, f.padding_mask_p1, 0)
        f.logr = f.ref_logprobs - f.logprobs
        f.kl = -f.logr
        f.non_score_reward = -args.kl_coef * f.kl
        f.rewards = f.non_score_reward.clone()
        f.actual_start = torch.arange(f.rewards.size(0), device=device)
        f.actual_end = torch.where(f.sequence_lengths_p1 < f.rewards.size(1), f.sequence_lengths_p1,
                                   f.sequence_lengths)
        f.rewards[f.actual_start, f.actual_end] += f.scores
        f.lastgaelam = 0
        f.advantages_reversed = []
        f.gen_length = f.responses.shape[1]
        for t in reversed(range(f.gen_length)):
            f.nextvalues = f.values[:, t + 1] if t < f.gen_length - 1 else 0.0
            f.delta = f.rewards[:, t] + args.gamma * f.nextvalues - f.values[:, t]
            f.lastgaelam = f.delta + args.gamma * args.lam * f.lastgaelam
            f.advantages_reversed.append(f.lastgaelam)
        f.advantages = torch.stack(f.advantages_reversed[::-1], axis=1)
        f.returns = f.advantages + f.values
        f.advantages = masked_whiten(f.advantages, ~f.padding_mask)
        f.advantages = torch.masked_fill(f.advantages, f.padding_mask, 0)
    mark("advantages")


def microbatch(ppo, f, inds, mark, tracker):
    """train() L633-691: one micro-batch's forward, losses, backward, optimizer step and no_grad statistics."""
    from trl.trainer.ppo_trainer import INVALID_LOGPROB, masked_mean
    from trl.trainer.utils import forward, selective_log_softmax

    args, accelerator, model = ppo.args, ppo.accelerator, ppo.model
    if tracker is not None:
        # MemTracker's per-module statistics allow one forward and backward of each module (not read here)
        tracker.reset_mod_stats()
    with accelerator.accumulate(model):
        f.micro_batch_inds = inds
        f.mb_advantage = f.advantages[f.micro_batch_inds]
        f.mb_responses = f.responses[f.micro_batch_inds]
        f.mb_query_responses = f.query_responses[f.micro_batch_inds]
        f.mb_logprobs = f.logprobs[f.micro_batch_inds]
        f.mb_return = f.returns[f.micro_batch_inds]
        f.mb_values = f.values[f.micro_batch_inds]
        mark("between")
        f.output, f.vpred_temp = forward(model, f.mb_query_responses, PAD)
        mark("update, forward")
        f.logits = f.output.logits[:, f.context_length - 1: -1]
        f.logits /= args.temperature + 1e-7
        f.new_logprobs = selective_log_softmax(f.logits, f.mb_responses)
        f.new_logprobs = torch.masked_fill(f.new_logprobs, f.padding_mask[f.micro_batch_inds], INVALID_LOGPROB)
        f.vpred = f.vpred_temp[:, f.context_length - 1: -1].squeeze(-1)
        f.vpred = torch.masked_fill(f.vpred, f.padding_mask_p1[f.micro_batch_inds], 0)
        f.vpredclipped = torch.clamp(f.vpred, f.mb_values - args.cliprange_value, f.mb_values + args.cliprange_value)
        f.vf_losses1 = torch.square(f.vpred - f.mb_return)
        f.vf_losses2 = torch.square(f.vpredclipped - f.mb_return)
        f.vf_loss_max = torch.max(f.vf_losses1, f.vf_losses2)
        f.vf_loss = 0.5 * masked_mean(f.vf_loss_max, ~f.padding_mask_p1[f.micro_batch_inds])
        f.vf_clipfrac = masked_mean((f.vf_losses2 > f.vf_losses1).float(), ~f.padding_mask_p1[f.micro_batch_inds])
        f.logprobs_diff = f.new_logprobs - f.mb_logprobs
        f.ratio = torch.exp(f.logprobs_diff)
        f.pg_losses = -f.mb_advantage * f.ratio
        f.pg_losses2 = -f.mb_advantage * torch.clamp(f.ratio, 1.0 - args.cliprange, 1.0 + args.cliprange)
        f.pg_loss_max = torch.max(f.pg_losses, f.pg_losses2)
        f.pg_loss = masked_mean(f.pg_loss_max, ~f.padding_mask[f.micro_batch_inds])
        f.loss = f.pg_loss + args.vf_coef * f.vf_loss
        mark("update, loss")
        accelerator.backward(f.loss)
        mark("update, backward")
        ppo.optimizer.step()
        ppo.optimizer.zero_grad()
        mark("update, optimizer step")
        with torch.no_grad():
            f.pg_clipfrac = masked_mean((f.pg_losses2 > f.pg_losses).float(), ~f.padding_mask[f.micro_batch_inds])
            f.prob_dist = torch.nn.functional.softmax(f.logits, dim=-1)
            f.entropy = torch.logsumexp(f.logits, dim=-1) - torch.sum(f.prob_dist * f.logits, dim=-1)
            f.approxkl = 0.5 * (f.logprobs_diff**2).mean()
        mark("update, statistics")


UPDATE_LOCALS = ("output", "vpred_temp", "logits", "new_logprobs", "vpred", "vpredclipped", "vf_losses1", "vf_losses2",
                 "vf_loss", "vf_clipfrac", "logprobs_diff", "ratio", "pg_losses", "pg_losses2", "pg_loss_max", "pg_loss",
                 "loss", "pg_clipfrac", "prob_dist", "entropy", "approxkl", "mb_return", "mb_advantage", "mb_values",
                 "mb_responses", "mb_query_responses", "mb_logprobs")
END_LOCALS = ("query_responses", "responses", "postprocessed_responses", "logprobs", "ref_logprobs", "values",
              "sequence_lengths", "contain_eos_token", "sequence_lengths_p1", "response_idxs", "padding_mask",
              "padding_mask_p1", "rewards", "actual_start", "actual_end", "advantages", "returns")


def update(ppo, f, arch, prompt, mark=lambda name: None, tracker=None):
    """One iteration of train()'s loop (L497-765): rollout, the PPO epochs over mini-batches of micro-batches, the
    end-of-update ``del``s."""
    args = ppo.args
    f.data = {"input_ids": torch.randint(1, arch.vocab, (args.local_batch_size, prompt))}
    rollout(ppo, f, mark)
    for _ in range(args.num_ppo_epochs):
        f.b_inds = np.random.permutation(args.local_batch_size)
        for mini_batch_start in range(0, args.local_batch_size, args.local_mini_batch_size):
            mini_batch_inds = f.b_inds[mini_batch_start: mini_batch_start + args.local_mini_batch_size]
            for micro_batch_start in range(0, args.local_mini_batch_size, args.per_device_train_batch_size):
                inds = mini_batch_inds[micro_batch_start: micro_batch_start + args.per_device_train_batch_size]
                microbatch(ppo, f, inds, mark, tracker)
            for name in UPDATE_LOCALS:
                delattr(f, name)
    with torch.no_grad():
        f.mean_kl = f.kl.sum(1).mean()
        f.mean_entropy = (-f.logprobs).sum(1).mean()
        f.mean_non_score_reward = f.non_score_reward.sum(1).mean()
    for name in ("kl", "mean_kl", "mean_entropy", "mean_non_score_reward", "scores", "non_score_reward"):
        delattr(f, name)
    for name in END_LOCALS:
        delattr(f, name)
    mark("end")


def wrap_generate(phases):
    """Mark the end of each chunk's generate() (batch_generation then pads every chunk's logits into one tensor)."""
    import trl.trainer.utils as utils

    original = utils.generate

    def generate(*args, **kwargs):
        out = original(*args, **kwargs)
        phases.mark("rollout, generate")
        return out
    utils.generate = generate
    return lambda: setattr(utils, "generate", original)


def quiet_hooks(tracker, full):
    """As measure_grpo.py: frozen modules take no gradient hooks, and MemTracker's module hooks skip the no_grad
    forwards (generate() and the scoring passes call modules many times); every allocation is still counted."""
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and full)
    for name in ("_pre_fw_hook", "_post_fw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda *args, hook=hook: hook(*args) if torch.is_grad_enabled() else None)
    for name in ("_pre_bw_hook", "_post_bw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda module, args, hook=hook: hook(module, args)
                if module in tracker.memory_tracking else None)


def run_case(label, inputs):
    torch.manual_seed(0)
    np.random.seed(0)
    started = time.time()
    values, arch, model, ref, reward_model = build(inputs)
    plain = {k: v for k, v in inputs.items() if k not in PPO_KEYS} | {"method": "full"}
    impl = measure.optimizer_impl(plain)
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    ppo = trainer(values, inputs, model, ref, reward_model, optimizer)
    frame = types.SimpleNamespace()
    prompt = values["seq"]
    with cuda_autocast(True):
        update(ppo, frame, arch, prompt)            # warm-up: optimizer state
    tracker = MemTracker()
    quiet_hooks(tracker, policy_method(inputs) == "full")
    tracker.track_external(model, optimizer, reward_model, *([ref] if ref is not None else []))
    phases = Phases(tracker)
    with tracker, cuda_autocast(True):
        update(ppo, frame, arch, prompt, tracker=tracker)     # what one update leaves the next is now tracked
        phases.peaks = {}
        phases.mark("before")
        restore = wrap_generate(phases)
        try:
            update(ppo, frame, arch, prompt, phases.mark, tracker)
        finally:
            restore()
    kept = {name: p for name, p in phases.peaks.items() if name not in ("before", "between", "end")}
    overall = max(kept.values(), key=lambda p: p["Total"])
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.policy.parameters()),
            "value_params": sum(p.numel() for p in model.value_model.parameters()),
            "reward_params": sum(p.numel() for p in reward_model.parameters()),
            "reference_params": sum(p.numel() for p in ref.parameters()) if ref is not None else 0,
            "peak_bytes": overall["Total"], "peak_breakdown": {k: v for k, v in overall.items() if k != "Total"},
            "phase_peaks": {name: p["Total"] for name, p in kept.items()},
            "phase_breakdown": {name: {k: v for k, v in p.items() if k != "Total"} for name, p in kept.items()},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text (a|b: either)")
    parser.add_argument("--write", action="store_true", help="write validation/measured_ppo.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    if args.write:
        import accelerate
        import peft
        import trl
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [done[label] for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one PPO update as TRL {trl.__version__}'s PPOTrainer.train "
                             "runs it (rollout by generate(), reference, value and reward passes, the PPO epoch's "
                             "micro-batches: forward of the policy and value model, backward, AdamW step), recorded "
                             "by validation/measure_ppo.py", results)
        record = json.loads(OUT.read_text())
        record = {**{k: v for k, v in record.items() if k != "cases"}, "trl": trl.__version__,
                  "peft": peft.__version__, "accelerate": accelerate.__version__, "cases": record["cases"]}
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        return
    for label, inputs in CASES:
        if args.only and not any(word in label for word in args.only.split("|")):
            continue
        result = run_case(label, inputs)
        phases = "  ".join(f"{k} {v / 2**20:7.1f}" for k, v in result["phase_peaks"].items())
        print(f"{label:56s} peak {result['peak_bytes'] / 2**20:8.1f} MiB  [{phases}]  {result['seconds']:5.1f}s",
              flush=True)
        with PARTIAL.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

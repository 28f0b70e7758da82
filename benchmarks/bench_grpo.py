"""One GRPO step (generate + score + update) with rl_llm vs TRL's ``GRPOTrainer``, same tiny model and task.

Both sides train the same randomly initialised tiny GPT-2 (``rl_llm.tiny``) on
the same arithmetic prompts (``make_arithmetic_problems``), with the same group
size, batch (prompts x group), reply budget, sampling (temperature 1, no top-k /
top-p), learning rate, one Adam step per batch with gradients clipped to norm 1,
no KL (beta = 0), token-mean aggregation (TRL's ``loss_type="dapo"``) and an
exact-match reward.

Phases, timed in CPU seconds of this process (``time.process_time``: on a shared
machine wall-clock time mostly measures the other tenants):

- ``generate``: prompts in, sampled replies and their log-probs out (ours: the
  ``TransformersWrapper`` call; TRL: ``GRPOTrainer._generate``); tokens = reply tokens.
- ``score``: rewards, advantages and the loss's forward pass (ours: the rest of the
  batch preparation and ``GRPOLoss``; TRL: the rest of ``_generate_and_score_completions``
  and ``compute_loss``); tokens = prompt + reply tokens.
- ``update``: backward, clipping and the optimizer step (TRL: the rest of its trainer
  step, i.e. also its callbacks and bookkeeping); tokens = prompt + reply tokens.

Contenders alternate in one process (``--rounds`` rounds of ``--steps`` timed steps
each, after one untimed warm-up step per round). TRL (``pip install trl``) is optional:
without it its column is skipped with a message.

    uv run --no-sync python benchmarks/bench_grpo.py --steps 5 --rounds 2
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from typing import Any

import torch
from tensordict import TensorDict

from rl_llm import GRPOLoss, History, TransformersWrapper
from rl_llm.data import make_arithmetic_problems
from rl_llm.objectives import group_relative_advantage
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer

PHASES = ("generate", "score", "update")


class Tally:
    """CPU seconds and tokens per phase, summed over timed steps."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tokens: dict[str, int] = defaultdict(int)
        self.steps = 0

    def add(self, phase: str, seconds: float, tokens: int) -> None:
        self.seconds[phase] += seconds
        self.tokens[phase] += tokens

    def row(self) -> dict[str, float]:
        out = {"step_ms": 1e3 * sum(self.seconds.values()) / max(self.steps, 1)}
        for phase in PHASES:
            out[f"{phase}_tok_s"] = self.tokens[phase] / max(self.seconds[phase], 1e-9)
            out[f"{phase}_ms"] = 1e3 * self.seconds[phase] / max(self.steps, 1)
        return out


def _reward(replies: list[str], answers: list[str]) -> torch.Tensor:
    return torch.tensor(
        [float(r == a + "<|im_end|>") for r, a in zip(replies, answers, strict=True)]
    )


def ours(args: argparse.Namespace, tally: Tally) -> None:
    """One warm-up step, then ``args.steps`` timed GRPO steps of rl_llm."""
    torch.manual_seed(args.seed)
    tokenizer = tiny_tokenizer()
    model = tiny_causal_lm(tokenizer, n_positions=64).train()
    sampler = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        input_mode="text",
        generate_kwargs={"max_new_tokens": args.max_new_tokens},
        decoder=args.decoder,
        pad_output=True,
    )
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    loss_fn = GRPOLoss(scorer, aggregation="token_mean", entropy_bonus=False)
    optim = torch.optim.Adam(model.parameters(), lr=args.lr)
    problems = make_arithmetic_problems(args.prompts * (args.steps + 1), seed=args.seed)
    texts = {
        p["query"]: History.from_chats(
            [{"role": "user", "content": p["query"]}]
        ).apply_chat_template(tokenizer=tokenizer)
        for p in problems
    }
    for step in range(args.steps + 1):  # step 0 warms up
        chunk = problems[step * args.prompts : (step + 1) * args.prompts]
        grouped = [p for p in chunk for _ in range(args.group)]
        td = TensorDict(
            text={"prompt": [texts[p["query"]] for p in grouped]}, batch_size=(len(grouped),)
        )
        t0 = time.process_time()
        with torch.no_grad():
            batch = sampler(td)
        t1 = time.process_time()
        rewards = _reward(batch["text", "response"], [p["answer"] for p in grouped])
        batch["advantage"] = group_relative_advantage(rewards.view(-1, args.group)).reshape(-1, 1)
        losses = loss_fn(batch)
        t2 = time.process_time()
        optim.zero_grad()
        losses.total().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        t3 = time.process_time()
        if step == 0:
            continue
        n_reply = int(batch["masks", "all_assistant_mask"].sum())
        n_all = int(batch["masks", "all_attention_mask"].sum())
        tally.add("generate", t1 - t0, n_reply)
        tally.add("score", t2 - t1, n_all)
        tally.add("update", t3 - t2, n_all)
        tally.steps += 1


def _timed(fn: Any, sink: dict[str, Any], name: str) -> Any:
    def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.process_time()
        result = fn(*a, **k)
        sink[name] = sink.get(name, 0.0) + time.process_time() - t0
        sink[name + "_result"] = result
        return result

    return wrapper


def trl(args: argparse.Namespace, tally: Tally) -> bool:
    """One warm-up step, then ``args.steps`` timed ``GRPOTrainer`` steps; ``False`` without TRL."""
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as err:
        print(f"TRL column skipped: {err} (pip install trl to compare).")
        return False
    torch.manual_seed(args.seed)
    tokenizer = tiny_tokenizer()
    model = tiny_causal_lm(tokenizer, n_positions=64).train()
    problems = make_arithmetic_problems(args.prompts * (args.steps + 1), seed=args.seed)
    dataset = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": p["query"]}], "answer": p["answer"]}
            for p in problems
        ]
    )

    def exact_match(completions: list, answer: list[str], **_: object) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [
            float(t.strip().removesuffix("<|im_end|>") == a)
            for t, a in zip(texts, answer, strict=True)
        ]

    step: dict[str, Any] = {}

    class Timer(TrainerCallback):
        def on_step_begin(self, *_: object, **__: object) -> None:
            step.clear()
            step["t0"] = time.process_time()

        def on_step_end(self, state_args: object, state: Any, *_: object, **__: object) -> None:
            total = time.process_time() - step["t0"]
            if state.global_step <= 1:  # the warm-up step
                return
            inputs = step["prepare_result"]
            n_reply = int(inputs["completion_mask"].sum())
            n_all = n_reply + int(inputs["prompt_mask"].sum())
            tally.add("generate", step["generate"], n_reply)
            tally.add("score", step["prepare"] - step["generate"] + step["loss"], n_all)
            tally.add("update", total - step["prepare"] - step["loss"], n_all)
            tally.steps += 1

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=args.prompts * args.group,
            num_generations=args.group,
            max_completion_length=args.max_new_tokens,
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            max_grad_norm=1.0,
            beta=0.0,
            loss_type="dapo",
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_steps=args.steps + 1,
            logging_steps=1000,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
            seed=args.seed,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[exact_match],
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[Timer()],
        )
        trainer._generate = _timed(trainer._generate, step, "generate")
        trainer._generate_and_score_completions = _timed(
            trainer._generate_and_score_completions, step, "prepare"
        )
        trainer.compute_loss = _timed(trainer.compute_loss, step, "loss")
        torch.set_num_threads(args.threads)
        trainer.train()
    return True


def _line(name: str, row: dict[str, float]) -> str:
    phases = " | ".join(
        f"{p} {row[f'{p}_tok_s']:8.0f} tok/s ({row[f'{p}_ms']:6.1f} ms)" for p in PHASES
    )
    return f"{name:7s}: {row['step_ms']:7.1f} CPU ms/step | {phases}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the contenders")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="replies per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--decoder", default="auto", choices=("auto", "cache", "generate"), help="ours"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"GRPO step: {args.prompts} prompts x {args.group} replies, <= {args.max_new_tokens} new tokens, "
        f"{args.threads} torch thread(s), {args.rounds} x {args.steps} steps each, CPU time"
    )
    mine, theirs = Tally(), Tally()
    has_trl = True
    for _ in range(args.rounds):
        ours(args, mine)
        has_trl = has_trl and trl(args, theirs)
    a = mine.row()
    print(_line("rl_llm", a))
    if has_trl:
        b = theirs.row()
        print(_line("TRL", b))
        ratios = ", ".join(f"{p} {a[f'{p}_tok_s'] / b[f'{p}_tok_s']:.2f}x" for p in PHASES)
        print(f"rl_llm / TRL: step {b['step_ms'] / a['step_ms']:.2f}x faster; per phase {ratios}")


if __name__ == "__main__":
    main()

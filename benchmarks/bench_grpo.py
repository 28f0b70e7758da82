"""One GRPO step (generate + score + update) with rl_llm vs TRL's ``GRPOTrainer``, same tiny model and task.

Both sides train the same randomly initialised tiny GPT-2 (``rl_llm.tiny``) on
the same arithmetic prompts (``make_arithmetic_problems``), with the same group
size, batch (prompts x group), reply budget, learning rate, one gradient step
per batch, no KL (beta = 0) and an exact-match reward. Reported: seconds per
step, and tokens/s for each phase (generation: reply tokens; scoring and update:
prompt + reply tokens). TRL's trainer does not expose its phases, so its column
is the whole step. TRL (``pip install trl``) is optional: without it that column
is skipped with a message.

    uv run --no-sync python benchmarks/bench_grpo.py --steps 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from tensordict import TensorDict

from rl_llm import GRPOLoss, History, TransformersWrapper
from rl_llm.data import make_arithmetic_problems
from rl_llm.objectives import group_relative_advantage
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer


def _reward(replies: list[str], answers: list[str]) -> torch.Tensor:
    return torch.tensor(
        [float(r == a + "<|im_end|>") for r, a in zip(replies, answers, strict=True)]
    )


def ours(args: argparse.Namespace) -> dict[str, float]:
    """Median seconds and tokens/s per phase of our GRPO step."""
    torch.manual_seed(args.seed)
    tokenizer = tiny_tokenizer()
    model = tiny_causal_lm(tokenizer, n_positions=64).train()
    sampler = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        input_mode="text",
        generate_kwargs={"max_new_tokens": args.max_new_tokens},
        pad_output=True,
    )
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    loss_fn = GRPOLoss(scorer, entropy_bonus=False)
    optim = torch.optim.Adam(model.parameters(), lr=args.lr)
    problems = make_arithmetic_problems(args.prompts * (args.steps + 1), seed=args.seed)
    texts = {
        p["query"]: History.from_chats(
            [{"role": "user", "content": p["query"]}]
        ).apply_chat_template(tokenizer=tokenizer)
        for p in problems
    }
    times: dict[str, list[float]] = {"generate": [], "score": [], "update": []}
    tokens: dict[str, list[int]] = {"generate": [], "score": [], "update": []}
    for step in range(args.steps + 1):  # step 0 warms up
        chunk = problems[step * args.prompts : (step + 1) * args.prompts]
        grouped = [p for p in chunk for _ in range(args.group)]
        td = TensorDict(
            text={"prompt": [texts[p["query"]] for p in grouped]}, batch_size=(len(grouped),)
        )
        t0 = time.perf_counter()
        with torch.no_grad():
            batch = sampler(td)
        t1 = time.perf_counter()
        rewards = _reward(batch["text", "response"], [p["answer"] for p in grouped])
        batch["advantage"] = group_relative_advantage(rewards.view(-1, args.group)).reshape(-1, 1)
        losses = loss_fn(batch)
        t2 = time.perf_counter()
        optim.zero_grad()
        losses.total().backward()
        optim.step()
        t3 = time.perf_counter()
        if step == 0:
            continue
        n_reply = int(batch["masks", "all_assistant_mask"].sum())
        n_all = int(batch["masks", "all_attention_mask"].sum())
        for phase, dt, n in (
            ("generate", t1 - t0, n_reply),
            ("score", t2 - t1, n_all),
            ("update", t3 - t2, n_all),
        ):
            times[phase].append(dt)
            tokens[phase].append(n)
    out = {"step_s": statistics.median(a + b + c for a, b, c in zip(*times.values(), strict=True))}
    for phase in times:
        out[f"{phase}_tok_s"] = sum(tokens[phase]) / sum(times[phase])
    return out


def trl(args: argparse.Namespace) -> dict[str, float] | None:
    """Median seconds per GRPOTrainer step, or ``None`` when TRL is not installed."""
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as err:
        print(f"TRL column skipped: {err} (pip install trl to compare).")
        return None
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

    step_times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *_: object, **__: object) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *_: object, **__: object) -> None:
            step_times.append(time.perf_counter() - self.t0)

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=args.prompts * args.group,
            num_generations=args.group,
            max_completion_length=args.max_new_tokens,
            learning_rate=args.lr,
            beta=0.0,
            temperature=1.0,
            max_steps=args.steps + 1,
            logging_steps=1000,
            save_strategy="no",
            report_to="none",
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
        trainer.train()
    return {"step_s": statistics.median(step_times[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps (after one warm-up step)")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="replies per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"GRPO step: {args.prompts} prompts x {args.group} replies, <= {args.max_new_tokens} new tokens, "
        f"{args.threads} torch thread(s), median of {args.steps} steps"
    )
    mine = ours(args)
    print(
        f"rl_llm : {mine['step_s'] * 1e3:8.1f} ms/step | generate {mine['generate_tok_s']:9.0f} reply tok/s | "
        f"score {mine['score_tok_s']:9.0f} tok/s | update {mine['update_tok_s']:9.0f} tok/s"
    )
    theirs = trl(args)
    if theirs is not None:
        print(f"TRL    : {theirs['step_s'] * 1e3:8.1f} ms/step (whole step; phases not exposed)")
        print(f"ratio TRL / rl_llm step time: {theirs['step_s'] / mine['step_s']:.2f}x")


if __name__ == "__main__":
    main()

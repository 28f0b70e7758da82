"""GRPO (Shao et al., 2024, arXiv:2402.03300) on verifiable arithmetic with a tiny LM, on CPU.

Two phases on one model: a short supervised warm-up (assistant-only NLL, ``SFTLoss``)
teaches the chat format and a little arithmetic; then GRPO samples ``group_size``
replies per prompt with ``TransformersWrapper``, rewards exact answers (1 or 0),
turns rewards into group-relative advantages and updates with ``GRPOLoss``. The
curve to watch is ``eval/return``: greedy exact-match accuracy over the task's distinct
problems (at most ``eval_problems`` of them, so the figure has no sampling noise), logged
at the end of the warm-up (frame 0) and along GRPO (frames = replies sampled). With the
default 0..9 operands the task has 100 distinct problems, all seen in the warm-up: GRPO
sharpens what the short warm-up left uncertain, it is not a test of generalisation.
Everything (tokenizer, model, task) is built in code: nothing is downloaded.

The loop drives the wrapper and the losses directly (prompts -> replies -> rewards ->
advantages -> loss) rather than through ``DatasetChatEnv`` / ``LLMCollector``: those keep
every turn as a ``History`` (render, parse the reply back into a message, extend the
conversation), which costs ~7x the CPU time of generating the replies themselves
with the text-mode wrapper (121 vs 18 ms per batch of 64 replies, docs/results.md), and
single-turn arithmetic needs none of it.

    uv run recipes/grpo.py                          # warm-up + GRPO, 4-13 min on the loaded 2-core CPU
    uv run recipes/grpo.py --smoke                  # a few seconds, end to end
    uv run recipes/grpo.py --resume runs/grpo/checkpoint.pt
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """SFT warm-up then GRPO on arithmetic with a tiny GPT-2."""

    max_operand: int = 9
    """Operands are drawn from 0..max_operand."""
    operations: str = "+"
    """Operators of the task (any of + - *)."""
    sft_problems: int = 100
    """Distinct problems seen in the warm-up (GRPO samples from every problem)."""
    sft_steps: int = 100
    """Gradient steps of the supervised warm-up."""
    sft_batch: int = 32
    """Conversations per warm-up step."""
    sft_lr: float = 3e-3
    """Adam learning rate of the warm-up."""
    total_frames: int = 49_152
    """GRPO replies to sample in total (steps x prompts_per_step x group_size)."""
    prompts_per_step: int = 8
    """Distinct prompts per GRPO step."""
    group_size: int = 16
    """Replies sampled per prompt (the group of the group-relative advantage)."""
    max_new_tokens: int = 4
    """Reply budget in tokens (answers take at most 3 plus the end token)."""
    lr: float = 5e-4
    """Adam learning rate of GRPO."""
    clip_epsilon: float = 0.2
    """Ratio clipping of GRPOLoss."""
    updates_per_batch: int = 2
    """Gradient steps on each sampled batch (the first is on-policy)."""
    aggregation: str = "token_mean"
    """GRPOLoss aggregation: token_mean (DAPO), prompt_mean (GRPO), constant_mean (Dr. GRPO)."""
    entropy_coeff: float = 0.0
    """Entropy bonus of GRPOLoss."""
    n_embd: int = 64
    """Width of the tiny GPT-2."""
    n_layer: int = 2
    """Blocks of the tiny GPT-2."""
    eval_problems: int = 100
    """Distinct problems of the greedy exact-match evaluation (all of them by default)."""
    eval_every: int = 2_048
    checkpoint_every: int = 8_192
    torch_threads: int = 2

    SMOKE: ClassVar[dict[str, object]] = {
        "sft_steps": 3,
        "sft_batch": 4,
        "total_frames": 64,
        "prompts_per_step": 4,
        "group_size": 4,
        "eval_problems": 8,
        "eval_every": 32,
        "checkpoint_every": 32,
    }


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import (
    RunKeeper,
    RunLogger,
    Stopwatch,
    counters_state,
    load_checkpoint,
    plot_learning_curve,
    run_counters,
    run_folder,
    seed_everything,
    write_summary,
)
from tensordict import TensorDict

from rl_llm import ChatHistory, GRPOLoss, History, SFTLoss, TransformersWrapper
from rl_llm.data import make_arithmetic_problems
from rl_llm.objectives import group_relative_advantage
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer


def conversation(problem: dict[str, str], with_answer: bool) -> list[dict[str, str]]:
    chat = [{"role": "user", "content": problem["query"]}]
    if with_answer:
        chat.append({"role": "assistant", "content": problem["answer"]})
    return chat


def exact_match(replies: list[str], answers: list[str]) -> torch.Tensor:
    """1 where the reply (ended by its end token) is exactly the answer, else 0."""
    return torch.tensor(
        [float(r == a + "<|im_end|>") for r, a in zip(replies, answers, strict=True)]
    )


class PromptRenderer:
    """Renders each problem's chat prompt once (``History.apply_chat_template``) and caches it."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer
        self.cache: dict[str, str] = {}

    def __call__(self, problems: list[dict[str, str]]) -> TensorDict:
        for p in problems:
            if p["query"] not in self.cache:
                history = History.from_chats(conversation(p, False))
                self.cache[p["query"]] = history.apply_chat_template(tokenizer=self.tokenizer)
        texts = [self.cache[p["query"]] for p in problems]
        return TensorDict(text={"prompt": texts}, batch_size=(len(problems),))


@torch.no_grad()
def evaluate_exact_match(
    greedy: TransformersWrapper, render: PromptRenderer, problems: list[dict[str, str]]
) -> float:
    td = greedy(render(problems))
    return exact_match(td["text", "response"], [p["answer"] for p in problems]).mean().item()


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "grpo")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    every_problem = make_arithmetic_problems(
        4096, max_operand=cfg.max_operand, operations=cfg.operations, seed=cfg.seed
    )
    sft_set = list({p["query"]: p for p in every_problem}.values())[: cfg.sft_problems]
    every_distinct = sorted(
        {p["query"]: p for p in every_problem}.values(), key=lambda p: p["query"]
    )
    eval_set = every_distinct[: cfg.eval_problems]
    rng = random.Random(cfg.seed)

    tokenizer = tiny_tokenizer()
    model = tiny_causal_lm(
        tokenizer, n_embd=cfg.n_embd, n_layer=cfg.n_layer, n_positions=64
    ).train()
    render = PromptRenderer(tokenizer)
    sampler = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        input_mode="text",
        generate_kwargs={"max_new_tokens": cfg.max_new_tokens, "do_sample": True},
        pad_output=True,
    )
    greedy = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        input_mode="text",
        generate_kwargs={"max_new_tokens": cfg.max_new_tokens, "do_sample": False},
    )
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    sft_loss = SFTLoss(scorer)
    grpo_loss = GRPOLoss(
        scorer,
        clip_epsilon=cfg.clip_epsilon,
        aggregation=cfg.aggregation,
        entropy_bonus=cfg.entropy_coeff > 0,
        entropy_coeff=cfg.entropy_coeff,
    )
    sft_optim = torch.optim.Adam(model.parameters(), lr=cfg.sft_lr)
    optim = torch.optim.Adam(model.parameters(), lr=cfg.lr)

    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    sft_done = 0
    if state is not None:
        model.load_state_dict(state["model"])
        sft_optim.load_state_dict(state["sft_optim"])
        optim.load_state_dict(state["optim"])
        rng.setstate(state["task_rng"])
        sft_done = state["sft_done"]
    frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    logger = RunLogger(out, cfg.total_frames, frames)
    clock = Stopwatch(wall)

    def snapshot() -> dict[str, object]:
        return {
            "model": model.state_dict(),
            "sft_optim": sft_optim.state_dict(),
            "optim": optim.state_dict(),
            "task_rng": rng.getstate(),
            "sft_done": sft_done,
            **counters_state(
                cfg,
                frames=frames,
                wall=clock.elapsed(),
                eval_return=eval_return,
                next_eval=next_eval,
                next_ckpt=next_ckpt,
            ),
        }

    keeper = RunKeeper(out, cfg, cfg.total_frames, state)

    try:
        # ---- phase 1: supervised warm-up (assistant tokens only) ----------------------------
        if sft_done < cfg.sft_steps:
            logger.log(
                0, **{"eval/return_before_sft": evaluate_exact_match(greedy, render, eval_set)}
            )
        while sft_done < cfg.sft_steps:
            batch = [conversation(rng.choice(sft_set), True) for _ in range(cfg.sft_batch)]
            history = History.from_chats(batch)
            td = TensorDict(
                history=ChatHistory(full=history, batch_size=(len(batch),)),
                batch_size=(len(batch),),
            )
            loss = sft_loss(td).loss_sft
            sft_optim.zero_grad()
            loss.backward()
            sft_optim.step()
            sft_done += 1
            if sft_done % 20 == 0 or sft_done == cfg.sft_steps:
                logger.log(0, **{"sft/loss": loss.item(), "sft/step": sft_done})
        if frames == 0:
            eval_return = evaluate_exact_match(greedy, render, eval_set)
            logger.log(0, **{"eval/return": eval_return})
            keeper.save(snapshot())

        # ---- phase 2: GRPO -----------------------------------------------------------------------
        while frames < cfg.total_frames:
            problems = [rng.choice(every_problem) for _ in range(cfg.prompts_per_step)]
            grouped = [p for p in problems for _ in range(cfg.group_size)]
            with torch.no_grad():
                batch = sampler(render(grouped))
            rewards = exact_match(batch["text", "response"], [p["answer"] for p in grouped])
            advantage = group_relative_advantage(rewards.view(-1, cfg.group_size)).reshape(-1, 1)
            batch["advantage"] = advantage
            for _ in range(cfg.updates_per_batch):
                losses = grpo_loss(batch)
                total = losses.total()
                optim.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optim.step()
            frames += len(grouped)
            logger.log(
                frames,
                **{
                    "train/return": rewards.mean().item(),
                    "loss_objective": losses.loss_objective.item(),
                    "clip_fraction": losses.clip_fraction.item(),
                    "kl_approx": losses.kl_approx.item(),
                    "reply_tokens": batch["masks", "all_assistant_mask"].sum().item()
                    / len(grouped),
                },
            )
            if frames >= next_eval or frames >= cfg.total_frames:
                while next_eval <= frames:
                    next_eval += cfg.eval_every
                eval_return = evaluate_exact_match(greedy, render, eval_set)
                logger.log(frames, **{"eval/return": eval_return})
                keeper.evaluated(frames, eval_return, snapshot)
            if frames >= next_ckpt or frames >= cfg.total_frames:
                while next_ckpt <= frames:
                    next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            logger.advance(len(grouped))
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    ends = keeper.finish(frames, eval_return, snapshot)

    logger.close()
    plot_learning_curve(
        logger.csv_path, out / "learning_curve.png", "GRPO arithmetic (exact match)"
    )
    summary: dict[str, object] = {
        "algo": "grpo",
        "env": f"arithmetic{cfg.operations}0..{cfg.max_operand}",
        "frames": frames,
        "wall_clock_s": round(clock.elapsed(), 1),
        "final_eval_return": eval_return,
        **ends,
    }
    print(write_summary(out, **summary))
    keeper.announce()
    return summary


if __name__ == "__main__":
    main()

"""PEFT check (workers/model/README.md, "LoRA adapters"), for a machine whose Python has torch, transformers and peft:
loads the fixture of bench/tools/peft_fixture.ts — the base folder with transformers, the adapter with
`PeftModel.from_pretrained`, the merged folder alone — and compares each one's per-token log-probs
of the fixture's ids with the service's LoRA policy (expected.json). Prints one JSON line; exits 1
when a difference exceeds 1e-4 (float32 both sides).

Usage: python3 bench/tools/peft_check.py DIR   (DIR as written by `deno run -A bench/tools/peft_fixture.ts DIR`)
"""
import json
import sys

USAGE = "Usage: python3 bench/tools/peft_check.py DIR   (DIR as written by bench/tools/peft_fixture.ts)"


def parse_args(argv):
    """The fixture folder from the command line. Prints the usage and exits 0 on --help/-h; prints
    one error line to stderr and exits 2 on a flag, a missing DIR or a second argument, as the
    bench's Deno tools do (bench/_args.ts)."""
    if any(a in ("--help", "-h") for a in argv):
        print(USAGE)
        sys.exit(0)
    problem = None
    if any(a.startswith("-") for a in argv):
        problem = f"Unknown option '{next(a for a in argv if a.startswith('-'))}'"
    elif len(argv) == 0:
        problem = "DIR is missing"
    elif len(argv) > 1:
        problem = f"Unexpected argument '{argv[1]}'. This command takes 1 positional argument"
    if problem:
        print(f"bench/tools/peft_check.py: {problem} (see --help)", file=sys.stderr)
        sys.exit(2)
    return argv[0]


def logprobs(model, ids):
    import torch

    with torch.no_grad():
        logits = model(input_ids=ids).logits.double()  # (B, T, V)
    return logits.log_softmax(-1)[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1)


def main():
    d = parse_args(sys.argv[1:])
    # Imported once the command line is good, so --help works where they are not installed.
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    with open(f"{d}/expected.json") as f:
        spec = json.load(f)
    ids = torch.tensor(spec["ids"])
    expected = torch.tensor(spec["logprobs"], dtype=torch.float64)
    base = AutoModelForCausalLM.from_pretrained(f"{d}/base", torch_dtype=torch.float32)
    base_lp = logprobs(base.eval(), ids)
    adapted = PeftModel.from_pretrained(base, f"{d}/adapter").eval()
    adapter_lp = logprobs(adapted, ids)
    merged = AutoModelForCausalLM.from_pretrained(f"{d}/merged", torch_dtype=torch.float32).eval()
    merged_lp = logprobs(merged, ids)
    out = {
        "adapter_max_diff": (adapter_lp - expected).abs().max().item(),
        "merged_max_diff": (merged_lp - expected).abs().max().item(),
        "base_vs_expected": (base_lp - expected).abs().max().item(),  # should be large
        "torch": torch.__version__,
    }
    print(json.dumps(out))
    ok = out["adapter_max_diff"] < 1e-4 and out["merged_max_diff"] < 1e-4 and out["base_vs_expected"] > 1e-2
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

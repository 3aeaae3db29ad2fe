"""
Can one attention head put its peak at an offset that the query's CONTENT chooses, as indirect
indexing needs? One head of dimension d, no model, trained (Adam, full batch) to attend to a target
key; its accuracy and mean softmax weight on the target read after the last step, on every query.

--tasks: offset (a query at the last position names an offset in 1..n; the keys look alike), index
(a query at position t names the key k < n) and content, the control (keys hold random letters, the
query names one). Heads, a_ts the score of key s:
    rope         q . R((s - t) theta) k: the content sets each pair's direction, so it can aim the
                 pair's cosine peak at any offset
    pope         sum_c mu_q[c] mu_k[c] cos((s - t) theta_c + delta_c), mu = softplus(W x): the
                 content sets only non-negative weights of cosines whose phases are fixed
    pope_signed  mu = W x (the paper's "no softplus" ablation: weights of either sign)

    python -m eval.attention_reach --out results/indirect_indexing/attention_reach  # 3 seeds a head
"""

import os

import torch
import torch.nn.functional as F

from eval import check_out, markdown_row, markdown_table
from model import pope_frequencies, pope_polar, rope_angles, rope_frequencies, rope_rotate
from prepare.common import parser, positive_int, write_json

HEADS = ('pope', 'pope_signed', 'rope')
TASKS = ('offset', 'index', 'content')


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--tasks', default=','.join(TASKS))
    p.add_argument('--seeds', type=positive_int, default=3)
    p.add_argument('--n', type=positive_int, default=15, help='offsets 1..n, or indices 0..n-1')
    p.add_argument('--T', type=positive_int, default=48, help='keys (indirect indexing: 48)')
    p.add_argument('--d', type=positive_int, default=64, help='head dimension')
    p.add_argument('--steps', type=positive_int, default=1500)
    p.add_argument('--out', default=None, help='folder for results.json')
    args = p.parse_args(argv)
    if args.out:
        check_out(args.out)  # before the work
    tasks = [t for t in args.tasks.split(',') if t]
    if not tasks or set(tasks) - set(TASKS):
        raise SystemExit(f"--tasks {args.tasks!r}: choose from {', '.join(TASKS)}")
    if args.n >= args.T or args.d % 2:
        raise SystemExit(f"--n {args.n}, --T {args.T}, --d {args.d}: need n below T (offsets fit "
                         "the keys) and an even d (RoPE's pairs)")
    rows = []
    print(markdown_table(['task', 'head', 'accuracy (per seed)', 'attention on the target',
                          'step at 90% accuracy'], []))  # then a row at a time
    for task in tasks:
        for kind in HEADS:
            runs = [train_head(kind, task, s, d=args.d, T=args.T, n=args.n, steps=args.steps)
                    for s in range(args.seeds)]
            rows.append({'task': task, 'head': kind, 'runs': runs})
            cells = [' / '.join(f"{r[k]:{f}}" for r in runs)
                     for k, f in (('acc', '.2f'), ('mass', '.3f'), ('step_90', ''))]
            print(markdown_row([task, kind, *cells]), flush=True)
    if args.out:
        write_json(os.path.join(args.out, 'results.json'), {'args': vars(args), 'rows': rows})


def train_head(kind, task, seed, d=64, T=48, n=15, steps=1500, lr=3e-2):
    """Train one head; its accuracy (argmax attention on the target), mean attention on the target,
    and the first step (a multiple of 25) at which the accuracy reached 90% (None: never)."""
    g = torch.Generator().manual_seed(seed)
    x_q, tq, x_k, target = make_task(task, T, n, g)
    randn = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)
    W_q, W_k = ((randn(x.shape[1], d) * 0.5).requires_grad_() for x in (x_q, x_k))
    delta = (-2 * torch.pi * torch.rand(d, generator=g, dtype=torch.float64)).requires_grad_()
    opt = torch.optim.Adam([W_q, W_k, delta], lr=lr)
    reached = None
    for step in range(steps + 1):
        a = head_scores(kind, x_q @ W_q, x_k @ W_k, tq, delta)
        if step % 25 == 0 and reached is None and (a.argmax(-1) == target).double().mean() >= 0.9:
            reached = step
        if step < steps:
            opt.zero_grad()
            F.cross_entropy(a, target).backward()
            opt.step()
    att = a.detach().softmax(-1)
    return {'acc': (att.argmax(-1) == target).double().mean().item(),
            'mass': att[torch.arange(len(target)), target].mean().item(), 'step_90': reached}


def head_scores(kind, q, k, tq, delta, base=10000.0):
    """Causal scores (n, T) of queries q (n, d) at positions tq over keys k (T, d) at 0..T-1."""
    T, d = k.shape
    pos = torch.arange(T)
    if kind == 'rope':
        cos, sin = rope_angles(pos, rope_frequencies(d // 2, base))
        a = rope_rotate(q, cos[tq], sin[tq]) @ rope_rotate(k, cos, sin).T
    else:  # the model's q' . k' (delta on the query), the paper's sum over the d channels
        theta, mu = pope_frequencies(d, base), 'identity' if kind == 'pope_signed' else 'softplus'
        a = pope_polar(q, tq, theta, delta[None], mu)[0] @ pope_polar(k, pos, theta, mu=mu).T
    return a.masked_fill(pos[None, :] > tq[:, None], float('-inf'))


def make_task(task, T, n, g):
    """Query contents (one-hot codes), query positions, key contents and each query's target key."""
    eye = lambda m: torch.eye(m, dtype=torch.float64)
    alike = torch.ones(T, 1, dtype=torch.float64)  # keys that only position tells apart
    if task == 'offset':  # query i at the last position names offset i + 1
        return eye(n), torch.full((n,), T - 1), alike, T - 2 - torch.arange(n)
    if task == 'index':  # the query at position t names index k < n (and knows t)
        k, t = (x.flatten() for x in torch.meshgrid(torch.arange(n), torch.arange(n, T),
                                                      indexing='ij'))
        return torch.cat([eye(n)[k], eye(T - n)[t - n]], 1), t, alike, k
    # content: key s holds letter letters[s]; query i names i
    letters = torch.randperm(T, generator=g)
    return eye(T), torch.full((T,), T - 1), eye(T)[letters], letters.argsort()


if __name__ == '__main__':
    main()

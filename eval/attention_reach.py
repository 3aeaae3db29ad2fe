"""
Can one attention head put its peak at an offset that the query's CONTENT chooses? A probe of the mechanism that
indirect indexing needs ("the letter k places from here", k read from the input), with PoPE and RoPE alone, no model.

One head of dimension d, trained (Adam, full batch) to attend to a target key. --tasks: offset (a query at the last
position names an offset o in 1..n; the T keys share one learned content vector, so only position tells them apart;
the target is the key o places back), index (a query at position t names an index k < n: the target is key k), and
content, the control (keys hold random letters, the query names one: no position involved). Heads:

    RoPE  a_ts = q . R((s - t) theta) k,    q = W x_q: the content sets each frequency pair's direction, so it
          can aim the pair's cosine peak at any offset
    PoPE  a_ts = sum_c mu_q[c] mu_k[c] cos((s - t) theta_c + delta_c),    mu_q = softplus(W x_q): the content
          sets only non-negative weights of cosines whose phases are fixed (position and a learned delta_c)
    pope_signed  PoPE with mu = W x (the paper's "no softplus" ablation: weights of either sign, phases still fixed)

The batch is every query of the task, so accuracy and attention on the target (the softmax weight on the target key,
the mean over the queries) are read after the last step on what the head was trained on: the weight keeps growing with
--steps long after the accuracy has passed 0.99 (the step at 90 % accuracy is the measure of how fast a head learns).

    python -m eval.attention_reach --out results/indirect_indexing/attention_reach     # the three tasks, 3 heads x 3 seeds, a table
"""

import os

import torch
import torch.nn.functional as F

from eval import check_out, markdown_row, markdown_table, parser, positive_int, write_json
from model import pope_frequencies, pope_polar, rope_angles, rope_frequencies, rope_rotate

HEADS = ('pope', 'pope_signed', 'rope')
TASKS = ('offset', 'index', 'content')


def head_scores(kind, q, k, tq, delta, base=10000.0):
    """Causal scores (n, T) of n queries at positions tq (q: n x d) over keys at positions 0..T-1 (k: T x d)."""
    T, d = k.shape
    pos = torch.arange(T)
    if kind == 'rope':
        cos, sin = rope_angles(pos, rope_frequencies(d // 2, base))
        a = rope_rotate(q, cos[tq], sin[tq]) @ rope_rotate(k, cos, sin).T
    else:  # the model's q' . k' (delta on the query: model.pope_phases), the paper's sum over the d channels
        theta, mu = pope_frequencies(d, base), 'identity' if kind == 'pope_signed' else 'softplus'
        a = pope_polar(q, tq, theta, delta[None], mu)[0] @ pope_polar(k, pos, theta, mu=mu).T
    return a.masked_fill(pos[None, :] > tq[:, None], float('-inf'))


def make_task(task, T, n, g):
    """Query contents (one-hot codes), query positions, key contents and the target key of each query."""
    eye = lambda m: torch.eye(m, dtype=torch.float64)  # noqa: E731
    if task == 'offset':  # query i at the last position names offset i + 1; all keys look alike
        return eye(n), torch.full((n,), T - 1), torch.ones(T, 1, dtype=torch.float64), T - 2 - torch.arange(n)
    if task == 'index':  # query at position t names index k < n (and knows t); all keys look alike
        k, t = torch.meshgrid(torch.arange(n), torch.arange(n, T), indexing='ij')
        k, t = k.flatten(), t.flatten()
        x_q = torch.cat([eye(n)[k], eye(T - n)[t - n]], 1)
        return x_q, t, torch.ones(T, 1, dtype=torch.float64), k
    letters = torch.randperm(T, generator=g)  # content: key s holds letter letters[s]; query i names letter i
    return eye(T), torch.full((T,), T - 1), eye(T)[letters], letters.argsort()


def train_head(kind, task, seed, d=64, T=48, n=15, steps=1500, lr=3e-2):
    """Train one head (Adam, full batch); accuracy (argmax attention on the target), mean attention on the
    target, and the first step (a multiple of 25) at which the accuracy reached 90% (None: never)."""
    g = torch.Generator().manual_seed(seed)
    x_q, tq, x_k, target = make_task(task, T, n, g)
    W_q = (torch.randn(x_q.shape[1], d, generator=g, dtype=torch.float64) * 0.5).requires_grad_()
    W_k = (torch.randn(x_k.shape[1], d, generator=g, dtype=torch.float64) * 0.5).requires_grad_()
    delta = (-2 * torch.pi * torch.rand(d, generator=g, dtype=torch.float64)).requires_grad_()  # the paper's init
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


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--tasks', default=','.join(TASKS))
    p.add_argument('--seeds', type=positive_int, default=3)
    p.add_argument('--n', type=positive_int, default=15, help='offsets 1..n, or indices 0..n-1 (shifts reach 15)')
    p.add_argument('--T', type=positive_int, default=48, help='keys (the indirect-indexing context)')
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
        raise SystemExit(f"--n {args.n}, --T {args.T}, --d {args.d}: need n below T (offsets fit the keys) and an "
                         "even d (RoPE's pairs)")
    rows = []
    print(markdown_table(['task', 'head', 'accuracy (per seed)', 'attention on the target', 'step at 90% accuracy'],
                         []))
    for task in tasks:
        for kind in HEADS:
            runs = [train_head(kind, task, s, d=args.d, T=args.T, n=args.n, steps=args.steps)
                    for s in range(args.seeds)]
            rows.append({'task': task, 'head': kind, 'runs': runs})
            print(markdown_row([task, kind, ' / '.join(f"{r['acc']:.2f}" for r in runs),
                                ' / '.join(f"{r['mass']:.3f}" for r in runs),
                                ' / '.join(str(r['step_90']) for r in runs)]), flush=True)
    if args.out:
        write_json(os.path.join(args.out, 'results.json'), {'args': vars(args), 'rows': rows})


if __name__ == '__main__':
    main()

"""
Chance levels of the indirect-indexing task, exact, from the way prepare/indirect_indexing.py draws its
examples: the string length L is uniform over its range and (source position, shift) uniform over the pairs
that keep the target inside the string. What a model scores when it knows only part of the question:

    letter      a uniform guess among the string's letters (but the source, unless shifts of 0 occur)
    position    the most likely target position for the string's length, never looking at source or shift
    window      a uniform guess among the L - |shift| positions that the length and the shift allow:
                the best a model can do if it reads the length and the shift but cannot find the source

    python -m eval.indirect_baselines          # a table, every variant of the data (in %)
"""

from fractions import Fraction

from prepare.indirect_indexing import VARIANTS, shift_choices, source_choices


def chance_levels(*, lengths=(20, 40), max_shift=15, zero_shift=False, sep=',', shifts=None, anchor=None):
    """Expected accuracy (a float in [0, 1]) of each partial-knowledge guess above, for make_example's
    options (sep is accepted so that a variant's options pass straight in; it changes nothing here).
    For the sub-tasks: content only (shift fixed at +-1) has window = letter, a guess among the L - 1
    letters; position only (anchor 'start' / 'end') is solved by reading the shift, so 'position' is
    what reading the length alone gives."""
    shifts = shift_choices(max_shift, zero_shift, shifts)
    n_lengths = lengths[1] - lengths[0] + 1
    letter = position = window = Fraction(0)
    for L in range(lengths[0], lengths[1] + 1):
        pairs = [(src, s) for src in source_choices(L, anchor) for s in shifts if 0 <= src + s < L]
        at = [0] * L  # how many pairs put the target at each position
        for src, s in pairs:
            at[src + s] += 1
        letter += Fraction(1, L if 0 in shifts else L - 1) / n_lengths
        position += Fraction(max(at), len(pairs)) / n_lengths
        window += sum(Fraction(1, L - abs(s)) for _, s in pairs) / len(pairs) / n_lengths
    return {'letter': float(letter), 'position': float(position), 'window': float(window)}


if __name__ == '__main__':
    print("| data set | letter | position | window |\n|---|---|---|---|")
    for name, options in VARIANTS.items():
        levels = chance_levels(**options)
        print(f"| {name} | " + " | ".join(f"{100 * levels[k]:.2f}" for k in ('letter', 'position', 'window')) + " |")

"""The documentation holds together: every relative link and image in README.md, HISTORY.md, docs/
and results/ points at a file of the repository (and a #part at one of its headings), the README
stays a front door of at most 200 lines whose results index links every experiment's page, and the
pages a user reads speak of the repository, not of how it was made."""

import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKED = ['README.md', 'HISTORY.md', 'docs/**/*.md', 'results/**/*.md']  # every link resolves
PLAIN = ['README.md', 'docs/**/*.md', 'results/**/*.md']  # these say nothing of how it was made
README_LINES = 200  # the front door: what PoPE is, quick start, files, experiments, tests
# whole words: 'around 5' and 'release' are not what this looks for
HISTORY_WORDS = re.compile(r'\bround [0-9]|issue #|device call|\blease', re.IGNORECASE)
# [text](target "title"), ![alt](src); the text may run over a line break
LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')


def pages(patterns):
    found = {os.path.relpath(p, ROOT) for pat in patterns
             for p in glob.glob(os.path.join(ROOT, pat), recursive=True)}
    return sorted(found)


def read(page):
    with open(os.path.join(ROOT, page), encoding='utf-8') as f:
        return f.read()


def prose(text):
    """The text without fenced code blocks, indented code blocks and inline code, where a link is
    not a link. Line breaks stay where they were, so line numbers hold."""
    text = re.sub(r'^```.*?^```[^\n]*$', lambda m: '\n' * m.group().count('\n'), text,
                  flags=re.MULTILINE | re.DOTALL)
    kept, in_code, blank = [], False, True
    for line in text.split('\n'):
        in_code = (line.startswith('    ') or line.startswith('\t')) and (blank or in_code)
        blank = not line.strip()
        kept.append('' if in_code else line)
    # a code span may run over one line break, not over a blank line
    return re.sub(r'`(?:[^`\n]|\n(?![ \t]*\n))*`', lambda m: '\n' * m.group().count('\n'),
                  '\n'.join(kept))


def links(text, anchors=False):
    """(line number, target) of every relative link and image in a markdown page, the #part cut off;
    with anchors=True, (line number, target, part) of those and of the page's own #part links."""
    out, text = [], prose(text)
    for m in LINK.finditer(text):
        target, n = m.group(1), text.count('\n', 0, m.start()) + 1
        if re.match(r'[a-z][a-z0-9+.-]*:', target, re.IGNORECASE):  # http:, mailto:
            continue
        path, _, part = target.partition('#')
        if anchors:
            out.append((n, path, part))
        elif path:
            out.append((n, path))
    return out


def slug(heading):
    """The #part a heading gets on GitHub: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def headings(text):
    """The #parts of a markdown page's headings (outside code)."""
    found = re.finditer(r'^#{1,6}\s+(.*?)\s*#*$', prose(text), re.MULTILINE)
    return {slug(m.group(1)) for m in found}


def repository_files():
    """The files git tracks (so a link to an ignored or untracked file fails here as in a fresh
    clone), or every file where this is not a git checkout."""
    try:
        out = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {os.path.normpath(p) for p in out.decode().split('\0') if p}


def test_the_pages_exist():
    assert 'README.md' in pages(LINKED) and 'HISTORY.md' in pages(LINKED)
    assert len(pages(['results/**/*.md'])) >= 5 and pages(['docs/**/*.md'])


def resolves(path, tracked):
    """path (relative to the root) is a file of the repository, or a folder that holds some."""
    if tracked is None:
        return os.path.exists(os.path.join(ROOT, path))
    return path in tracked or any(p.startswith(path + os.sep) for p in tracked)


@pytest.mark.parametrize('page', pages(LINKED))
def test_every_relative_link_resolves_to_a_file(page):
    tracked = repository_files()
    broken = []
    for n, target in links(read(page)):
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if path.startswith('..') or not resolves(path, tracked):
            broken.append(f'{page}:{n}: {target}')
    assert not broken, 'links to no file of the repository:\n' + '\n'.join(broken)


@pytest.mark.parametrize('page', pages(LINKED))
def test_every_link_to_a_part_of_a_page_finds_its_heading(page):
    broken = []
    for n, target, part in links(read(page), anchors=True):
        path = os.path.normpath(os.path.join(os.path.dirname(page), target)) if target else page
        if part and path.endswith('.md') and os.path.isfile(os.path.join(ROOT, path)) \
                and part not in headings(read(path)):
            broken.append(f'{page}:{n}: {target}#{part}')
    assert not broken, 'links to a heading the page does not have:\n' + '\n'.join(broken)


def test_the_readme_is_a_front_door_and_the_results_index_links_every_experiment():
    lines = read('README.md').count('\n')
    assert lines <= README_LINES, (f'README.md has {lines} lines, more than {README_LINES}: move '
                                   'findings, tables and notes to results/README.md or their page')
    assert 'results/README.md' in [target for _, target in links(read('README.md'))]
    index = links(read('results/README.md'))
    linked = {os.path.normpath(os.path.join('results', t)) for _, t in index}
    experiments = [p for p in pages(['results/*/README.md'])]
    assert len(experiments) >= 5 and not set(experiments) - linked, (
        'experiments whose page results/README.md does not link: '
        + ', '.join(sorted(set(experiments) - linked)))


@pytest.mark.parametrize('page', pages(PLAIN))
def test_no_word_of_how_the_project_was_made(page):
    hits = [f'{page}:{n}: {line.strip()}' for n, line in enumerate(read(page).split('\n'), 1)
            if HISTORY_WORDS.search(line)]
    assert not hits, ("the page speaks of the project's history (HISTORY.md is the place):\n"
                      + '\n'.join(hits))


def test_the_link_reader_finds_links_and_skips_code():
    text = ('See [a](a.md) and ![b](img/b.png "title") and [c](https://x.org) and [d](#anchor) '
            'and [e](e.md#part).\n`[not](inline.md)`\n\n    [not](indented.md)\n'
            '```\n[not](fenced.md)\n```\n- list\n    [f](f.md) and [a link\nover two lines](g.md) '
            'and `code over\na line [not](h.md)`\n')
    assert links(text) == [(1, 'a.md'), (1, 'img/b.png'), (1, 'e.md'), (9, 'f.md'), (9, 'g.md')]
    parts = [(t, p) for _, t, p in links(text, anchors=True) if p]
    assert parts == [('', 'anchor'), ('e.md', 'part')]
    assert slug("A real pretrained model: SmolLM2-135M") == 'a-real-pretrained-model-smollm2-135m'
    assert headings('# Top\n\n## The kernel\n```\n## not a heading\n```\n') == {'top', 'the-kernel'}
    assert HISTORY_WORDS.search('as measured in Round 8') and HISTORY_WORDS.search('a device call')
    assert not HISTORY_WORDS.search('around 5 minutes, rounded to 3 digits, the JSON release')


# an absolute path of the machine a file was made on
MACHINE_PATH = re.compile(r'(?<![\w.<>-])/(work|root|tmp|home|opt)/')


def text_files():
    """The tracked files that are text (no NUL byte in their first 8 kB)."""
    tracked = repository_files()
    if tracked is None:
        pytest.skip('not a git checkout')
    out = []
    for path in sorted(tracked):
        with open(os.path.join(ROOT, path), 'rb') as f:
            if b'\0' not in f.read(8192):
                out.append(path)
    return out


def test_no_path_of_a_build_machine():
    hits = []
    for path in text_files():
        with open(os.path.join(ROOT, path), encoding='utf-8', errors='replace') as f:
            hits += [f'{path}:{n}: {line.strip()[:120]}' for n, line in enumerate(f, 1)
                     if MACHINE_PATH.search(line)]
    assert not hits, ('absolute paths of a build machine (write a path relative to the repository, '
                      '<repo> or <tmp>; code takes a folder from tempfile):\n' + '\n'.join(hits))
    assert MACHINE_PATH.search('wrote /' + 'work/main/out/x.csv')
    assert MACHINE_PATH.search('--out=/' + 'tmp/a')
    assert not MACHINE_PATH.search('python results/speed/bench.py --out=<tmp>/generate and a '
                                   'checkout/tmp' + '/x')

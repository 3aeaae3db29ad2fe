"""
The Linux kernel's hand-written C, a large real corpus that installs offline: every .c and .h file
of the kernel tree but the generated tables of drivers/gpu/drm/amd/include/asic_reg/, in GPT-2
tokens, <|endoftext|> (50256) after each file; with --tokenizer=smollm2-135m (or a .gguf file) in
that model's tokens, into data/linux_c_smollm2. From Debian's linux-source-6.12 (`apt-get install
linux-source-6.12`; 6.12.118: ~389M train, ~13M val, ~8M test tokens; GPL-2.0):

    python -m prepare.linux_c                                 # /usr/src/linux-source-6.12.tar.xz
    python -m prepare.linux_c --source linux-6.12.118.tar.xz  # the same tree from kernel.org
    python -m prepare.linux_c --source linux-source-6.12/     # an unpacked tree
    python -m prepare.linux_c --export linux_c.tar.xz         # the kept files alone

--source takes an export too (the same data set). Split by folder (many drivers are near-copies
of their siblings): sha256 of a file's folder cut to its first four parts, mod 100: 0-1 val, 2-3
test, the rest train. files.tsv lists each file's split, path and tokens in stream order.
"""

import hashlib
import io
import json
import os
import pathlib
import tarfile

import numpy as np
from tqdm import tqdm

from prepare.common import (SPLITS, SourceMissing, argument_parser, check_writable, data_dir,
                            encoding, run, start_dataset, write_meta, write_streams, writing)

DEFAULT_SOURCE = '/usr/src/linux-source-6.12.tar.xz'
EXCLUDED = ('drivers/gpu/drm/amd/include/asic_reg/',)  # generated tables, not written by people
GROUP_DEPTH = 4  # a file's group: its folder cut to this many parts
VAL, TEST = range(0, 2), range(2, 4)  # sha256(group) mod 100
EXPORT_INFO = 'linux_c_export.json'  # inside an export: where its files came from
TOP = ('Makefile', EXPORT_INFO)  # the files read besides the C: the version, an export's origin
EXPORT_MODES = {'.tar.xz': 'w:xz', '.txz': 'w:xz', '.tar.gz': 'w:gz', '.tgz': 'w:gz', '.tar': 'w'}


def main(argv=None):
    p = argument_parser(__doc__, 'linux_c', f'the kernel tarball (default {DEFAULT_SOURCE}), '
                        'an unpacked tree, or an --export of this script', tokenizer=True)
    p.add_argument('--export', help='instead of a data set: the kept files as this .tar.xz '
                   '(.tar.gz, .tar)')
    args = p.parse_args(argv)
    source = args.source or DEFAULT_SOURCE
    check_source(source)
    if args.export:
        check_export(args.export, source)
    else:  # a missing tokenizer, or an out_dir that is no data set, stops it before the work
        enc = encoding(args.tokenizer)
        work = start_dataset(args.out_dir or data_dir('linux_c', args.tokenizer))
    print(f'reading {source}')
    files, makefile, info = read_tree(source)
    version = kernel_version(makefile or b'')
    if version is None:
        raise SourceMissing(f'{source} has no top Makefile with VERSION, PATCHLEVEL and SUBLEVEL: '
                            'it is not a kernel tree; give the kernel tarball, the folder that '
                            'holds its Makefile, or an export')
    if not files:
        raise SourceMissing(f'{source} holds no .c or .h file: give the kernel tarball or tree')
    info = info or {'source_file': os.path.basename(os.path.normpath(source)),  # (an export: its
                    'source_sha256': None if os.path.isdir(source) else file_sha256(source)}  # own)
    origin = {'version': version, **info, 'selection_sha256': selection_sha256(files)}
    if args.export:
        return export(files, makefile, origin, args.export)

    order = sorted(files, key=lambda p: (SPLITS.index(split_of(p)), p))
    sizes = []  # (split, path, tokens) in stream order

    def pieces():  # (split, ids) of each file in order, a batch of files tokenized on every core
        bar = tqdm(total=len(order), desc='tokenizing', unit=' files')
        for i in range(0, len(order), 2048):
            paths = order[i:i + 2048]
            bar.update(len(paths))
            texts = [files[p].decode('utf-8', 'replace') for p in paths]
            for p, ids in zip(paths, enc.encode_ordinary_batch(texts, num_threads=os.cpu_count())):
                sizes.append((split_of(p), p, len(ids)))
                yield split_of(p), np.array(ids, dtype=np.uint32)  # (in meta.json's dtype)
    counts = write_streams(work, pieces(), enc.n_vocab, enc.eot_token)
    with writing(work), open(os.path.join(work, 'files.tsv'), 'w', encoding='utf-8') as f:
        f.write('split\tpath\ttokens\n' + ''.join(f'{s}\t{p}\t{n}\n' for s, p, n in sizes))
    n_files = {split: sum(1 for s, _, n in sizes if s == split and n) for split in counts}
    rule = f'{VAL.start}-{VAL.stop - 1} val, {TEST.start}-{TEST.stop - 1} test'
    return write_meta(
        work, vocab_size=enc.n_vocab, tokenizer=enc.name, eot=enc.eot_token, tokens=counts,
        source=f"Linux {version}: its .c and .h files less {', '.join(EXCLUDED)}, from "
        f"{origin['source_file']}, {enc.name} tokens, an end of text ({enc.eot_token}) after every "
        f"file; split by folder (its first {GROUP_DEPTH} parts, sha256 mod 100: {rule}); files per "
        "split: " + ', '.join(f'{k} {v:,}' for k, v in n_files.items()),
        files=n_files, **origin)


def split_of(path):
    """The split of a kept path, by its group: its folder's first GROUP_DEPTH parts."""
    group = '/'.join(os.path.dirname(path).split('/')[:GROUP_DEPTH]) or '.'
    h = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) % 100
    return 'val' if h in VAL else 'test' if h in TEST else 'train'


def kept(path):
    """Whether a path of the tree, from its top, is hand-written C."""
    return path.endswith(('.c', '.h')) and not path.startswith(EXCLUDED)


def check_source(source):
    """One line, before the work, for a --source that is no kernel tree, tarball or export."""
    if not os.path.exists(source):
        raise SourceMissing(f'{source} does not exist: `apt-get install linux-source-6.12` puts '
                            'the tarball there, or pass --source with a kernel tarball from '
                            'kernel.org, an unpacked tree or an export')
    if source.endswith('.deb'):
        raise SourceMissing(f'{source} is a Debian package: unpack it (dpkg-deb -x {source} DIR) '
                            'and pass --source DIR/usr/src/linux-source-6.12.tar.xz')
    if os.path.isdir(source) and not os.path.isfile(os.path.join(source, 'Makefile')):
        inside = sorted(n for n in os.listdir(source)  # (a home folder would be read whole)
                        if n.startswith('linux') or n.endswith(('.tar.xz', '.tar.gz')))
        raise SourceMissing(f"{source} is a folder without a Makefile, not the top of a kernel "
                            "tree: give the folder that holds the kernel's Makefile, the kernel "
                            "tarball or an export" + (f" (here: {', '.join(inside[:3])})"
                                                      if inside else ''))


def read_tree(source):
    """({kept path: bytes}, the top Makefile's bytes or None, an export's info or None) of a folder
    or a tarball (its paths less their first part when every member shares it)."""
    files = {}
    if os.path.isdir(source):
        for full in pathlib.Path(source).rglob('*'):
            path = full.relative_to(source).as_posix()
            if (kept(path) or path in TOP) and full.is_file() and not full.is_symlink():
                files[path] = full.read_bytes()
    else:
        try:
            with tarfile.open(source, 'r|*') as tar:  # streamed: one pass over a compressed file
                for member in tar:
                    path = member.name.removeprefix('./')
                    if member.isfile() and (kept(path.partition('/')[2]) or kept(path)
                                            or path.rpartition('/')[2] in TOP):
                        files[path] = tar.extractfile(member).read()
        except (tarfile.TarError, EOFError, OSError) as err:
            raise SourceMissing(f'{source} is not a readable tarball ({type(err).__name__}: '
                                f'{err}): give the kernel tarball, an unpacked tree or an export '
                                'of this script') from None
        if len({p.partition('/')[0] for p in files}) == 1 and all('/' in p for p in files):
            files = {p.partition('/')[2]: b for p, b in files.items()}  # one top folder: dropped
    top = {p: files.pop(p) for p in TOP if p in files}
    files = {p: b for p, b in files.items() if kept(p)}  # a nested Makefile is not the top one
    if EXPORT_INFO not in top:
        return files, top.get('Makefile'), None
    try:  # an export: where its files came from
        info = json.loads(top[EXPORT_INFO])
        return files, top.get('Makefile'), {k: info[k] for k in ('source_file', 'source_sha256')}
    except (ValueError, KeyError, TypeError):
        raise SourceMissing(f'{source}: its {EXPORT_INFO} is damaged or not of this script: make '
                            'the export again (--export) from the kernel tarball') from None


def kernel_version(makefile):
    """'6.12.118' from the top Makefile's VERSION, PATCHLEVEL, SUBLEVEL and EXTRAVERSION lines."""
    lines = makefile.decode('utf-8', 'replace').splitlines()[:20]
    fields = {k.strip(): v.strip() for k, eq, v in (line.partition('=') for line in lines) if eq}
    parts = [fields.get(k) for k in ('VERSION', 'PATCHLEVEL', 'SUBLEVEL')]
    return None if None in parts else '.'.join(parts) + fields.get('EXTRAVERSION', '')


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def selection_sha256(files):
    """sha256 over the kept paths and their bytes, in sorted order, each length-prefixed."""
    h = hashlib.sha256()
    for path in sorted(files):
        for part in (path.encode(), files[path]):
            h.update(len(part).to_bytes(8, 'little'))
            h.update(part)
    return h.hexdigest()


def check_export(path, source):
    """One line, before the work, for an --export that cannot be written."""
    for refused, message in [
        (not path.endswith(tuple(EXPORT_MODES)),
         f": name a tarball, ending in {', '.join(EXPORT_MODES)} (.tar.xz: the smallest)"),
        (os.path.isdir(path),
         f" is a folder: name the file to write, e.g. {os.path.join(path, 'linux_c.tar.xz')}"),
        (os.path.isfile(path) and os.path.samefile(path, source),
         " is the --source it reads, which it would replace: name another file"),
    ]:
        if refused:
            raise SourceMissing(f"--export {path}{message}")
    check_writable(os.path.dirname(os.path.abspath(path)), f'--export {path}')


def export(files, makefile, info, path):
    """The kept files, the Makefile and EXPORT_INFO as one tarball, written whole or not at all."""
    mode = next(m for ending, m in EXPORT_MODES.items() if path.endswith(ending))
    with writing(path + '.tmp', option='--export'):  # a full disk or a Ctrl-C: one line, no file
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with tarfile.open(path + '.tmp', mode, **({'preset': 9} if mode == 'w:xz' else {})) as tar:
            for name, data in [(EXPORT_INFO, json.dumps(info, indent=1).encode()),
                               ('Makefile', makefile), *sorted(files.items())]:
                member = tarfile.TarInfo(f'linux_c/{name}')
                member.size, member.mtime, member.mode = len(data), 0, 0o644
                tar.addfile(member, io.BytesIO(data))
        os.replace(path + '.tmp', path)
    print(f'wrote {path}: {len(files):,} files, {os.path.getsize(path) / 1e6:.1f} MB')


if __name__ == '__main__':
    run(main)

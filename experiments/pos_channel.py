"""A part-of-speech channel, measured (WantWords predicts a description's part of speech among its channels): a
logistic regression over the model's query vectors of the description corpus predicts p(pos | description), and a
result gains `weight` x the best p among its senses' parts of speech, over the default ranking's 300 best.

    python experiments/pos_channel.py outputs/minilm-defsent-plus

Query sets: the benchmark's dev and test descriptions (over all entries and the 66,421 most frequent single words),
500 Oxford and 500 Chang definitions; ranks 0-based, gold words lemma-aware (`published_terms.gold_forms`).
"""

from __future__ import annotations

import argparse

from published_terms import DATA, encode, frequent_single_words, gold_forms, rank, summary
from sklearn.linear_model import LogisticRegression

from dictembed.description_corpus import load_descriptions
from dictembed.dictionary import load_dictionary
from dictembed.evaluation import leak_free
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import Result, ReverseDictionary

WORDNET_POS = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}  # a satellite adjective is an adjective


def best_pos(result: Result, p: dict[str, float]) -> float:
    """The highest predicted probability among the parts of speech of the result's senses."""
    return max(
        (p.get(WORDNET_POS.get(pos or "", ""), 0.0) for w in result.words for pos in result.pos.get(w, [])), default=0.0
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder")
    parser.add_argument("--weights", default="0,0.02,0.04,0.06,0.1", help="the channel's weights, one row each")
    args = parser.parse_args()

    rd = ReverseDictionary.load(args.model).prepare()
    corpus = load_descriptions("everyday")
    classifier = LogisticRegression(max_iter=2000).fit(encode(rd, [d.text for d in corpus]), [d.pos for d in corpus])
    vocabulary, _ = frequent_single_words(rd.space.words, 66_421)
    sets = []
    for split in ("dev", "test"):
        pairs = load_description_pairs(DATA, split=split)
        sets.append((split, [q for q, _ in pairs], [gold_forms(e) for _, e in pairs], True))
    for name in ("oxford", "chang"):
        queries = leak_free.cross_dictionary_queries(rd.space.words, load_dictionary(name), limit=500)
        sets.append((name, list(queries.definitions), [{rd.space.words[g].lower()} for g in queries.gold], False))
    for name, texts, golds, descriptions in sets:
        vectors = encode(rd, texts)
        probabilities = [dict(zip(classifier.classes_, row, strict=True)) for row in classifier.predict_proba(vectors)]
        found = rd.search_vectors(vectors, k=300, max_definitions=20, texts=texts)
        channel = [[best_pos(r, p) for r in results] for results, p in zip(found, probabilities, strict=True)]
        for weight in (float(w) for w in args.weights.split(",")):
            rows = {"all": [], "66k": []}
            for results, gains, gold in zip(found, channel, golds, strict=True):
                scored = sorted(
                    ((r.score + weight * g, r.words) for r, g in zip(results, gains, strict=True)), key=lambda x: -x[0]
                )
                rows["all"].append(rank(scored, gold, None))
                if descriptions:
                    rows["66k"].append(rank(scored, gold, vocabulary))
            cells = [
                f"{key} {s['median']:g} / {s['acc@1']:.3f} / {s['acc@10']:.3f} / {s['acc@100']:.3f}"
                for key, ranks in rows.items()
                if ranks and (s := summary(ranks))
            ]
            print(f"{name:<6} weight {weight:<5g} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()

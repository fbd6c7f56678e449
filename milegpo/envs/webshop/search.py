"""The search engine: BM25 (bm25s) over the product documents WebShop indexes.

WebShop indexes one document per product with pyserini (Lucene) and answers ``search[...]`` with
the top 50 hits (``SEARCH_RETURN_N``), shown 10 per page (``PRODUCT_WINDOW``). The document is
built as its ``search_engine/convert_product_file_format.py`` builds it (:func:`product_document`):
``" ".join([Title, Description, BulletPoints[0], option_text]).lower()`` where option_text is
``", and ".join(f"{group}: {', '.join(values)}")``.

Here the index is bm25s (pure Python, no Java) set up like pyserini's defaults: BM25 with
k1 = 0.9, b = 0.4 (Lucene's scoring), Lucene's English analyzer approximated by: lower case,
word tokens (single characters kept), Lucene's 33 English stop words, the Porter stemmer
(PyStemmer's ``porter``, the algorithm of Lucene's ``PorterStemFilter``). Only documents that
share a term with the query are hits (as in Lucene); ties go to the earlier document.

The index is built once per catalog and cached on disk under ``<cache>/webshop/index/<digest>``
(digest of the documents and these settings), written atomically so concurrent pool workers may
build it at once; later processes load it in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

#: WebShop's SEARCH_RETURN_N and PRODUCT_WINDOW
SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10

#: Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (pyserini's default analyzer)
LUCENE_STOPWORDS = ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
                    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
                    "this", "to", "was", "will", "with")
#: pyserini's BM25 defaults
BM25_K1, BM25_B = 0.9, 0.4
_TOKEN_PATTERN = r"(?u)\b\w+\b"
_INDEX_VERSION = "bm25s-lucene-porter-v2"


def option_text(options: dict) -> str:
    """``"color: black, white, and size: small, large"``: the option part of a product's document."""
    return ", and ".join(f"{name}: {', '.join(values)}" for name, values in options.items())


def product_document(product: dict) -> str:
    """The text WebShop indexes for a loaded product (lower-cased title, description, first bullet, options)."""
    bullets = product["BulletPoints"]
    return " ".join([product["Title"], product["Description"], bullets[0] if bullets else "",
                     option_text(product["options"])]).lower()


def analyze(texts: Sequence[str], stemmer=None) -> list[list[str]]:
    """The index terms of each text: lower case, word tokens, Lucene's stop words out, Porter stems."""
    import bm25s
    import Stemmer

    tokens = bm25s.tokenize(list(texts), lower=True, token_pattern=_TOKEN_PATTERN, stopwords=list(LUCENE_STOPWORDS),
                            stemmer=stemmer or Stemmer.Stemmer("porter"), return_ids=False, show_progress=False)
    return [[t for t in doc if t] for doc in tokens]  # the stemmer empties a lone "s" (of "dog's")


class SearchEngine:
    """BM25 over product documents; :meth:`search` returns the top ASINs of a query, best first."""

    def __init__(self, retriever, asins: Sequence[str]) -> None:
        import Stemmer

        self._retriever = retriever
        self.asins = list(asins)
        self._stemmer = Stemmer.Stemmer("porter")
        self._vocab = retriever.vocab_dict

    # ------------------------------------------------------------------ build / load
    @staticmethod
    def digest(documents: Sequence[str], asins: Sequence[str]) -> str:
        """Fingerprint of an index: the documents, their ASINs and the analyzer settings."""
        h = hashlib.blake2b(digest_size=12)
        h.update(_INDEX_VERSION.encode())
        for asin, doc in zip(asins, documents):
            h.update(asin.encode("utf-8", "replace") + b"\x1f" + doc.encode("utf-8", "replace") + b"\x1e")
        return h.hexdigest()

    @classmethod
    def build(cls, documents: Sequence[str], asins: Sequence[str]) -> "SearchEngine":
        """Index ``documents`` (one per ASIN, same order) in memory."""
        import bm25s

        if len(documents) != len(asins):
            raise ValueError(f"SearchEngine.build: {len(documents)} documents but {len(asins)} ASINs")
        if not documents:
            raise ValueError("SearchEngine.build: no documents to index")
        tokens = analyze(documents)
        retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        retriever.index(tokens, show_progress=False)
        return cls(retriever, asins)

    @classmethod
    def cached(cls, documents: Sequence[str], asins: Sequence[str], cache_root: Path) -> "SearchEngine":
        """Load the index of these documents from ``cache_root/index/<digest>``, building and saving it first if absent."""
        import bm25s

        folder = Path(cache_root) / "index" / cls.digest(documents, asins)
        if (folder / "asins.json").exists():
            retriever = bm25s.BM25.load(str(folder), load_vocab=True, show_progress=False, verbosity=0)
            return cls(retriever, json.loads((folder / "asins.json").read_text()))
        engine = cls.build(documents, asins)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            engine._retriever.save(str(tmp), show_progress=False)
            (tmp / "asins.json").write_text(json.dumps(engine.asins))
            os.replace(tmp, folder)  # atomic; another process that won the race leaves its own copy
        except OSError:
            if not (folder / "asins.json").exists():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return engine

    # ------------------------------------------------------------------ query
    def search(self, keywords: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The ASINs of the (at most ``k``) best documents that share a term with ``keywords``, best first."""
        # bm25s keeps "" in its vocabulary (the empty document's token) without a column: never a query term
        ids = [self._vocab[t] for t in analyze([keywords], self._stemmer)[0] if t in self._vocab and t]
        if not ids:
            return []
        scores = np.asarray(self._retriever.get_scores_from_ids(ids))
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            cut = np.argpartition(-scores[hits], k - 1)[:k]
            threshold = scores[hits[cut]].min()
            hits = hits[scores[hits] >= threshold]  # keep every tie at the cut, ordered below
        order = np.lexsort((hits, -scores[hits]))
        return [self.asins[i] for i in hits[order][:k]]


__all__ = ["SearchEngine", "product_document", "option_text", "SEARCH_RETURN_N", "PRODUCT_WINDOW",
           "LUCENE_STOPWORDS", "BM25_K1", "BM25_B"]

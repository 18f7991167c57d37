"""How well the memory-proposal rules tell a standing rule from chatter (``make eval``).

Reads the labelled utterances kept with the unit tests and prints, for the labelled set
the rules were written beside and for the held-out set written after them (the check on
how they generalise), the precision and recall of the yes/no decision, the count per
label, how often a found rule got its labelled category, and every utterance read
wrongly. Exits 1 when either set falls below the floor the unit tests hold (precision
0.95, recall 0.70)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
import json
from pathlib import Path
import sys

ROOT = Path(__file__).resolve().parent.parent
# Like `local.runtime`, put the layer on the path so `python -m bench...` runs from the root.
if str(ROOT / "layers" / "recall") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "recall"))

from recall.domain.memory_proposals import MemoryProposal, propose_memories  # noqa: E402

DATA = ROOT / "tests" / "unit" / "preferences"
LABELLED = DATA / "utterances.jsonl"
HELD_OUT = DATA / "held_out.jsonl"
MIN_PRECISION = 0.95
MIN_RECALL = 0.70


@dataclass(frozen=True)
class Utterance:
    """One labelled line: whether it states something worth remembering, and as what."""

    text: str
    label: bool
    category: str | None = None
    kind: str | None = None


@dataclass
class Score:
    """The confusion counts of the yes/no decision, with the utterances read wrongly."""

    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    true_negatives: int = 0
    right_category: int = 0
    wrong: list[tuple[Utterance, MemoryProposal | None]] = field(default_factory=list)
    wrong_category: list[tuple[Utterance, MemoryProposal]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        said_yes = self.true_positives + self.false_positives
        return self.true_positives / said_yes if said_yes else 1.0

    @property
    def recall(self) -> float:
        rules = self.true_positives + self.false_negatives
        return self.true_positives / rules if rules else 1.0

    @property
    def holds_the_floor(self) -> bool:
        return self.precision >= MIN_PRECISION and self.recall >= MIN_RECALL


def load(path: Path) -> list[Utterance]:
    """The utterances of a JSON-lines file, one object a line."""
    utterances: list[Utterance] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            utterances.append(
                Utterance(raw["text"], bool(raw["label"]), raw.get("category"), raw.get("kind"))
            )
    return utterances


def score(utterances: list[Utterance]) -> Score:
    """Read every utterance as a whole message, the way a chat turn arrives."""
    result = Score()
    for utterance in utterances:
        proposals = propose_memories(utterance.text)
        first = proposals[0] if proposals else None
        if first is not None and utterance.label:
            result.true_positives += 1
            if utterance.category in (None, first.category):
                result.right_category += 1
            else:
                result.wrong_category.append((utterance, first))
        elif first is not None:
            result.false_positives += 1
            result.wrong.append((utterance, first))
        elif utterance.label:
            result.false_negatives += 1
            result.wrong.append((utterance, None))
        else:
            result.true_negatives += 1
    return result


def report(name: str, utterances: list[Utterance]) -> Score:
    result = score(utterances)
    rules = sum(1 for u in utterances if u.label)
    print(f"{name}: {len(utterances)} utterances ({rules} rules, {len(utterances) - rules} not)")
    print(
        f"  precision {result.precision:.3f}  recall {result.recall:.3f}  "
        f"(tp {result.true_positives}, fp {result.false_positives}, "
        f"fn {result.false_negatives}, tn {result.true_negatives})"
    )
    for label in ("brand", "preferences", "forbidden", "context", "history"):
        labelled = [u for u in utterances if u.label and u.category == label]
        found = sum(1 for u in labelled if propose_memories(u.text))
        print(f"  {label:<12} {found:>3} of {len(labelled):>3} found")
    kinds = sorted({u.kind or "unlabelled" for u in utterances if not u.label})
    for kind in kinds:
        negatives = [u for u in utterances if not u.label and (u.kind or "unlabelled") == kind]
        kept = sum(1 for u in negatives if not propose_memories(u.text))
        print(f"  not: {kind:<17} {kept:>3} of {len(negatives):>3} left alone")
    print(f"  category right on {result.right_category} of {result.true_positives} rules found")
    for utterance, proposal in result.wrong:
        if proposal is None:
            print(f"  missed [{utterance.category}] {utterance.text}")
        else:
            print(
                f"  saved ({utterance.kind}) {utterance.text} -> "
                f"{proposal.category.value} {proposal.key} {proposal.confidence}"
            )
    for utterance, proposal in result.wrong_category:
        print(
            f"  category [{utterance.category}] read as {proposal.category.value}: {utterance.text}"
        )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    labelled = report("labelled set", load(LABELLED))
    print()
    held_out = report("held-out set", load(HELD_OUT))
    return 0 if labelled.holds_the_floor and held_out.holds_the_floor else 1


if __name__ == "__main__":
    sys.exit(main())

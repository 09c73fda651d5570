"""The kit's coreference set: short templated stories whose antecedents are known by construction.

    passages = generate(n_passages=240, seed=0)     # deterministic
    write_jsonl(passages, DEFAULT_PATH)              # data/coref/passages.jsonl (committed)
    passages = read_jsonl()                          # what the notebook reads

    python -m bertlook_utils.corefdata               # regenerate data/coref/passages.jsonl

No coreference corpus can be installed here (CoNLL-2012 / OntoNotes is licensed), so the kit writes one.
A passage is a few sentences about 2-3 people, 1-2 objects and sometimes a group, drawn from hand-written
lists of names, professions, objects and sentence templates. Every mention of an entity after its first
is a coreferent mention of one of three types, as in Clark et al. Table 2:

- pronoun: he/him/his, she/her, it/its, they/them/their, used only where gender, number and animacy leave
  exactly one entity mentioned so far that it could refer to;
- proper: a person's surname, first name or full name again (first mention: the full name, whose head
  word is the surname);
- nominal: a definite description, "the surgeon" (the person was introduced as a surgeon), "the bicycle"
  (introduced as "an old bicycle") or "the instrument" (introduced as "a violin"), each unique in its story.

All mentions of the story's entities are annotated, also those whose entity is never mentioned again
(distractors); words outside mentions ("the station", "lunch") are not entities. The mention types are
balanced by choosing, where several forms are possible, the type with the fewest mentions so far.
Words are pre-split (punctuation and the possessive "'s" are words of their own).
"""
from __future__ import annotations

import argparse
import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.cache import DATA_DIR

DEFAULT_PATH = DATA_DIR / "coref" / "passages.jsonl"
DEFAULT_PASSAGES = 240
DEFAULT_SEED = 0
MAX_WORDS = 88  # keeps every passage under 128 wordpieces with [CLS] and [SEP] (checked by a test)
TYPES = ("pronoun", "proper", "nominal")

# -- hand-written lexicons ---------------------------------------------------------------------------
FEMALE_NAMES = (
    "Maria Anna Laura Sofia Elena Clara Nadia Grace Alice Emma Julia Irene Fatima Priya Mei Yuki Amara Leila "
    "Olga Ingrid Rosa Carmen Helen Sarah Ruth Nora Eva Lucia Hannah Chloe Zoe Aisha Keiko Tanya Beatrice "
    "Vera Miriam Paula Diana Martha").split()
MALE_NAMES = (
    "John David Peter Thomas Daniel Samuel Omar Carlos Luis Ivan Hans Kenji Ravi Ahmed Felix Oscar Victor "
    "Hugo Marco Paul George Henry Jacob Adam Simon Leon Mateo Tariq Kwame Arjun Pablo Stefan Erik Noah "
    "Frank Martin Andrew Robert Walter Dmitri").split()
SURNAMES = (
    "Lopez Novak Fischer Okafor Tanaka Kowalski Brennan Haddad Lindqvist Moreau Rossi Petrov Nguyen Singh "
    "Castillo Murphy Schmidt Duarte Sato Khan Jensen Alvarez Dubois Mensah Varga Kim Bauer Costa Horvat "
    "Ibrahim Olsen Reyes Walsh Becker Silva Hughes Fernandes Romano Popescu Marsh Whitfield Carver Ashby "
    "Holloway Pryce Quinn Delaney Foster Grant Hale Keller Lambert Morgan Nash Osei Park Reid Stone Tran "
    "Vance Weber Young Zimmer").split()
PROFESSIONS = (
    "surgeon pilot teacher engineer lawyer baker chemist architect journalist plumber carpenter librarian "
    "painter farmer dentist pharmacist mechanic electrician translator economist gardener photographer "
    "accountant firefighter detective tailor editor biologist novelist chef sculptor banker geologist "
    "nurse").split()
# (noun, a more general noun or None): "a violin" may later be "the violin" or "the instrument"
OBJECTS = (
    ("laptop", "computer"), ("bicycle", None), ("sedan", "car"), ("violin", "instrument"),
    ("cello", "instrument"), ("novel", "book"), ("dictionary", "book"), ("parcel", "package"),
    ("suitcase", "bag"), ("backpack", "bag"), ("armchair", "chair"), ("kettle", "appliance"),
    ("toaster", "appliance"), ("camera", "device"), ("drill", "tool"), ("hammer", "tool"),
    ("telescope", None), ("guitar", "instrument"), ("painting", "picture"), ("photograph", "picture"),
    ("vase", None), ("clock", None), ("rug", "carpet"), ("trophy", "prize"), ("lantern", "lamp"),
    ("umbrella", None), ("microscope", None), ("typewriter", "machine"), ("sewing-machine", "machine"),
    ("wallet", None), ("scooter", None), ("tent", None),
)
ADJECTIVES = "old new red blue small heavy broken expensive green wooden antique battered shiny large".split()
GROUPS = ("students volunteers tourists neighbours children visitors workers passengers interns fans cyclists "
          "guests").split()
COUNTS = ("three", "four", "some", "several", "a few", "two")

# Sentence templates. A slot is {case:kind:n}: case subj / obj / poss; kind P (person), O (object),
# G (group); slots with the same n are the same entity, different n different entities.
TEMPLATES = (
    "{subj:P:1} thanked {obj:P:2} for the advice .",
    "{subj:P:1} called {obj:P:2} after the meeting .",
    "{subj:P:1} met {obj:P:2} at the station .",
    "{subj:P:1} asked {obj:P:2} about the schedule .",
    "On Monday , {subj:P:1} visited {obj:P:2} .",
    "{poss:P:1} sister sent {obj:P:2} a letter .",
    "{subj:P:1} waited for {obj:P:2} outside the library .",
    "{subj:P:1} disagreed with {obj:P:2} about the budget .",
    "{subj:P:1} repaired {obj:O:2} in the garage .",
    "{subj:P:1} bought {obj:O:2} at the market .",
    "{subj:P:1} carried {obj:O:2} up the stairs .",
    "{subj:P:1} found {obj:O:2} under the desk .",
    "{subj:P:1} cleaned {obj:O:2} carefully .",
    "{subj:P:1} left {obj:O:2} on the train .",
    "{subj:P:1} showed {obj:O:2} to {obj:P:3} .",
    "{subj:P:1} gave {obj:O:2} to {obj:P:3} .",
    "{subj:P:1} borrowed {obj:O:2} from {obj:P:3} .",
    "{subj:P:1} put {obj:O:2} next to {poss:P:1} bed .",
    "{subj:O:1} was heavier than expected .",
    "{subj:O:1} had a scratch on {poss:O:1} side .",
    "{subj:O:1} stood in the corner of {poss:P:2} office .",
    "{subj:O:1} belonged to {obj:P:2} .",
    "Nobody knew where {subj:O:1} came from .",
    "{subj:G:1} cheered when {subj:P:2} arrived .",
    "{subj:P:1} spoke to {obj:G:2} about the plan .",
    "{subj:G:1} admired {obj:O:2} .",
    "{subj:G:1} helped {obj:P:2} with {poss:P:2} homework .",
    "{subj:P:1} taught {obj:G:2} how to use {obj:O:3} .",
    "{subj:G:1} waited near {obj:O:2} for an hour .",
    "{subj:G:1} packed {poss:G:1} bags .",
    "{subj:P:1} smiled .",
    "{subj:P:1} was late again .",
    "{poss:P:1} phone rang twice .",
    "{subj:P:1} thought about {poss:P:1} family .",
    "Later , {subj:P:1} went home .",
    "After lunch , {subj:P:1} returned to {poss:P:1} desk .",
    "In the evening , {subj:P:1} wrote to {obj:P:2} .",
    "{subj:P:1} and a friend looked at {obj:O:2} .",
)
SLOT = re.compile(r"\{(subj|obj|poss):([POG]):(\d)\}")
PRONOUNS = {  # class -> case -> form
    "m": {"subj": "he", "obj": "him", "poss": "his"},
    "f": {"subj": "she", "obj": "her", "poss": "her"},
    "n": {"subj": "it", "obj": "it", "poss": "its"},
    "pl": {"subj": "they", "obj": "them", "poss": "their"},
}


# -- data model ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mention:
    """A mention: words [start, end) of its passage, `head` its head word (indices into passage words).

    type: "pronoun", "proper" or "nominal"; number "sg"/"pl"; gender "m"/"f"/"n" or "unknown" (a role
    noun such as "the surgeon" does not say); animacy "animate"/"inanimate"; person 3. These attributes
    are what a lexicon would give a rule-based system (pronoun forms, gendered first names)."""

    start: int
    end: int
    head: int
    entity: int
    type: str
    number: str
    gender: str
    animacy: str
    person: int = 3


@dataclass
class Passage:
    """A story: `words` (pre-split) and its `mentions` in text order."""

    id: str
    words: list[str]
    mentions: list[Mention] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def mention_text(self, i: int) -> str:
        m = self.mentions[i]
        return " ".join(self.words[m.start:m.end])

    def coreferent(self) -> list[int]:
        """Indices of the mentions whose entity was mentioned before (the ones to resolve)."""
        seen, found = set(), []
        for i, m in enumerate(self.mentions):
            if m.entity in seen:
                found.append(i)
            seen.add(m.entity)
        return found

    def antecedents(self, i: int) -> list[int]:
        """Indices of the earlier mentions of mention i's entity."""
        return [j for j in range(i) if self.mentions[j].entity == self.mentions[i].entity]

    def marked_text(self) -> str:
        """The text with every mention in brackets, numbered and tagged with its entity: [0 Maria Lopez|e1]."""
        words = list(self.words)
        for i, m in enumerate(self.mentions):
            words[m.start] = f"[{i} " + words[m.start]
            words[m.end - 1] = words[m.end - 1] + f"|e{m.entity}]"
        return " ".join(words)

    def to_json(self) -> dict:
        return {"id": self.id, "words": self.words, "mentions": [asdict(m) for m in self.mentions]}

    @classmethod
    def from_json(cls, record: dict) -> "Passage":
        return cls(record["id"], list(record["words"]), [Mention(**m) for m in record["mentions"]])


@dataclass
class _Entity:
    kind: str  # "P", "O", "G"
    cls: str  # pronoun class: "m", "f", "n", "pl"
    first: str = ""
    surname: str = ""
    profession: str = ""
    noun: str = ""
    general: str | None = None
    adjective: str = ""
    count: str = ""
    introduced: bool = False
    profession_known: bool = False


# -- generation ---------------------------------------------------------------------------------------
class _Writer:
    """Writes one passage sentence by sentence, keeping the global type counts balanced."""

    def __init__(self, rng: random.Random, counts: dict[str, int], pid: str):
        self.rng, self.counts = rng, counts
        self.passage = Passage(pid, [])
        self.entities = self._cast()
        self.mentioned: list[int] = []  # entities in order of first mention
        self.used_templates: set[str] = set()  # no template twice in one story

    def _cast(self) -> list[_Entity]:
        rng = self.rng
        people = []
        firsts = set()
        for surname, profession in zip(rng.sample(SURNAMES, 3), rng.sample(PROFESSIONS, 3)):
            gender = rng.choice("mf")
            first = rng.choice([n for n in (MALE_NAMES if gender == "m" else FEMALE_NAMES) if n not in firsts])
            firsts.add(first)
            people.append(_Entity("P", gender, first=first, surname=surname, profession=profession))
        people = people[:rng.choice((2, 3, 3))]
        objects, n_objects = [], rng.choice((1, 2))
        for noun, general in rng.sample(OBJECTS, len(OBJECTS)):
            if len(objects) == n_objects:
                break
            if all(general is None or general != o.general for o in objects):
                objects.append(_Entity("O", "n", noun=noun, general=general, adjective=rng.choice(ADJECTIVES)))
        groups = [_Entity("G", "pl", noun=rng.choice(GROUPS), count=rng.choice(COUNTS))] if rng.random() < 0.6 else []
        cast = people + objects + groups
        rng.shuffle(cast)
        return cast

    # a mention of entity e in a slot, as (words, head offset in words, type, gender)
    def _forms(self, e: _Entity, case: str) -> list[tuple[list[str], int, str, str]]:
        gender = e.cls if e.kind == "P" else ("n" if e.kind == "O" else "unknown")
        if not e.introduced:
            if e.kind == "P":
                words = [e.first, e.surname]
                if case != "poss" and self.rng.random() < 0.6:
                    e.profession_known = True
                    return [(words + [",", _article(e.profession), e.profession, ","], 1, "proper", gender)]
                return [(words, 1, "proper", gender)]
            if e.kind == "O":
                return [([_article(e.adjective), e.adjective, e.noun], 2, "nominal", gender)]
            count = e.count.split()
            return [(count + [e.noun], len(count), "nominal", gender)]
        forms = []
        rivals = [x for x in self.mentioned if self.entities[x].cls == e.cls and self.entities[x] is not e]
        if not rivals:
            forms.append(([PRONOUNS[e.cls][case]], 0, "pronoun", gender))
        if e.kind == "P":
            name = self.rng.choice(([e.surname], [e.surname], [e.first], [e.first, e.surname]))
            forms.append((name, len(name) - 1, "proper", gender))
            if e.profession_known:
                forms.append((["the", e.profession], 1, "nominal", "unknown"))
        elif e.kind == "O":
            noun = e.general if e.general and self.rng.random() < 0.5 else e.noun
            forms.append((["the", noun], 1, "nominal", gender))
        else:
            forms.append((["the", e.noun], 1, "nominal", gender))
        return forms

    def _choose(self, forms):
        """The form whose type has the fewest mentions so far (ties and 25 % of the time: at random)."""
        if len(forms) == 1 or self.rng.random() < 0.25:
            return self.rng.choice(forms)
        fewest = min(self.counts[f[2]] for f in forms)
        return self.rng.choice([f for f in forms if self.counts[f[2]] == fewest])

    def _cast_for(self, template: str) -> dict[str, int] | None:
        """Entities for a template's slots (None when the story has none that fit)."""
        slots = {}
        for case, kind, n in SLOT.findall(template):
            slots.setdefault(n, (kind, case == "poss"))
        chosen, used = {}, set()
        for n, (kind, needs_intro) in slots.items():
            pool = [i for i, e in enumerate(self.entities) if e.kind == kind and i not in used
                    and (e.introduced or not needs_intro)]
            if not pool:
                return None
            fresh = [i for i in pool if not self.entities[i].introduced]
            pick = self.rng.choice(fresh if fresh and self.rng.random() < 0.5 else pool)
            chosen[n] = pick
            used.add(pick)
        return chosen

    def _pronoun_ok(self, template: str, cast: dict[str, int]) -> bool:
        """A slot that repeats an entity within the sentence must be a pronoun: no rival may be in the story
        by then (entities mentioned before, or earlier in this sentence)."""
        slots = SLOT.findall(template)
        for k, (_, _, n) in enumerate(slots):
            if any(earlier[2] == n for earlier in slots[:k]):
                before = set(self.mentioned) | {cast[s[2]] for s in slots[:k]}
                e = self.entities[cast[n]]
                if any(self.entities[x].cls == e.cls and x != cast[n] for x in before):
                    return False
        return True

    def sentence(self) -> bool:
        """Append one sentence; False when it would not fit in MAX_WORDS."""
        for _ in range(50):
            template = self.rng.choice([t for t in TEMPLATES if t not in self.used_templates])
            cast = self._cast_for(template)
            if cast is not None and self._pronoun_ok(template, cast):
                break
        else:
            return False
        self.used_templates.add(template)
        words, mentions, in_sentence = [], [], set()
        for piece in re.split(r"(\{[^}]+\})", template):
            if not piece.startswith("{"):
                if piece.split()[:1] == ["."] and words[-1:] == [","]:
                    words.pop()  # "Laura Whitfield , a dentist ." rather than "a dentist , ."
                words += piece.split()
                continue
            case, kind, n = SLOT.fullmatch(piece).groups()
            entity_id = cast[n]
            e = self.entities[entity_id]
            forms = self._forms(e, case)
            if n in in_sentence:  # the same entity again in one sentence: "... to his desk", never a name
                forms = [f for f in forms if f[2] == "pronoun"]
            in_sentence.add(n)
            form, head, kind_of, gender = self._choose(forms)
            if not words:
                form = [form[0][:1].upper() + form[0][1:]] + form[1:]
            name_end = len(form)
            if e.kind == "P" and not e.introduced and "," in form:
                name_end = 2  # the mention is the name; the apposition ", a surgeon ," is not
            start = len(words)
            words += form
            if case == "poss" and kind_of != "pronoun":
                words.append("'s")
            mentions.append((start, start + name_end, start + head, entity_id, kind_of, e, gender))
            e.introduced = True
            if entity_id not in self.mentioned:
                self.mentioned.append(entity_id)
        if len(self.passage.words) + len(words) > MAX_WORDS:
            return False
        offset = len(self.passage.words)
        self.passage.words += words
        for start, end, head, entity_id, kind_of, e, gender in mentions:
            mention = Mention(offset + start, offset + end, offset + head, entity_id, kind_of,
                              "pl" if e.cls == "pl" else "sg", gender, "animate" if e.kind != "O" else "inanimate")
            if any(m.entity == entity_id for m in self.passage.mentions):
                self.counts[kind_of] += 1
            self.passage.mentions.append(mention)
        return True


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def generate(n_passages: int = DEFAULT_PASSAGES, seed: int = DEFAULT_SEED) -> list[Passage]:
    """`n_passages` stories, deterministic in `seed`; each at most MAX_WORDS words."""
    if n_passages < 1:
        raise ValueError("n_passages must be at least 1")
    rng = random.Random(seed)
    counts = {t: 0 for t in TYPES}
    passages = []
    for i in range(n_passages):
        while True:
            writer = _Writer(rng, dict(counts), f"p{i:04d}")
            while writer.sentence():
                pass
            if writer.passage.coreferent():
                break
        counts = writer.counts
        passages.append(writer.passage)
    return passages


def write_jsonl(passages: list[Passage], path: Path | str = DEFAULT_PATH) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in passages))


def read_jsonl(path: Path | str = DEFAULT_PATH) -> list[Passage]:
    """The passages of a JSON-lines file (the committed set by default)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `python -m bertlook_utils.corefdata` to write it")
    return [Passage.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_PATH))
    parser.add_argument("--passages", type=int, default=DEFAULT_PASSAGES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    passages = generate(args.passages, args.seed)
    write_jsonl(passages, args.out)
    n = sum(len(p.coreferent()) for p in passages)
    print(f"wrote {len(passages)} passages with {n} coreferent mentions to {args.out}")


if __name__ == "__main__":
    main()

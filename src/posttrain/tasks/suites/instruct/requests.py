"""The base requests: everyday writing forms x subjects, written for this suite (no public
benchmark's prompts). Each subject carries the plain content an oracle reply is built from:
sentences (with commas and filler words, so `no_comma` and `forbidden` ask for a change),
short tips for bullet points and a title.

Held out by base request: every request about a HELDOUT subject is held out, so the held-out
split never shows a subject that training saw.
"""

from __future__ import annotations

from typing import NamedTuple


class Subject(NamedTuple):
    name: str            # the id part
    about: str           # "about ..." in the request
    title: str
    sentences: tuple[str, ...]
    tips: tuple[str, ...]


FORMS = {  # id -> (request wording, opening sentence of the reply)
    "note": ("Write a short note to a friend about {about}.", "I wanted to tell you about {about}."),
    "email": ("Write a brief email to a coworker about {about}.", "I am writing to share a few words about {about}."),
    "story": ("Write a very short story about {about}.", "This is a small story about {about}."),
    "blog": ("Write a short blog post about {about}.", "Today's post is about {about}."),
    "review": ("Write a short review of {about}.", "Here is my honest review of {about}."),
    "advice": ("Give some friendly advice about {about}.", "Here is some advice about {about}."),
    "announce": ("Write a short announcement about {about}.", "We have some news about {about}."),
    "diary": ("Write a diary entry about {about}.", "Dear diary, today was about {about}."),
    "pitch": ("Write a short pitch for {about}.", "Let me tell you why {about} is worth your time."),
    "thanks": ("Write a thank-you message that mentions {about}.", "Thank you so much, and I keep thinking about {about}."),
}

SUBJECTS = (
    Subject("garden", "a neighbourhood garden", "Green Corners",
            ("The garden sits behind the old school, and it is really quiet in the morning.",
             "Neighbours grow tomatoes, beans and herbs in small raised beds.",
             "Children come by after class, and they just love watering the plants.",
             "It is also a very good place to meet people who live nearby.",
             "On weekends we share seeds, tools and a pot of tea.",
             "Honestly, it has made the street feel much friendlier."),
            ("water early in the day", "share spare seeds", "label every bed", "bring gloves")),
    Subject("cooking", "learning to cook", "Kitchen Steps",
            ("I started with simple dishes, like soup, rice and eggs.",
             "At first I burned things, but I actually learned a lot from those mistakes.",
             "Cooking at home is also cheaper than eating out.",
             "A sharp knife and a good pan make a very big difference.",
             "I now cook for friends on Fridays, and they just keep coming back.",
             "It really feels good to make a meal from scratch."),
            ("start with easy recipes", "keep your knife sharp", "taste as you go", "clean while cooking")),
    Subject("rain", "a rainy weekend", "Two Grey Days",
            ("It rained from Friday night until Sunday, so we stayed inside.",
             "We read books, played cards and baked bread.",
             "The sound of the rain on the roof was really calming.",
             "I also finally sorted the old photos in the hall cupboard.",
             "By Sunday evening the sky cleared, and the streets were shining.",
             "It was a very slow weekend, and I just enjoyed it."),
            ("keep a stack of books", "bake something warm", "call an old friend", "sort one drawer")),
    Subject("bicycle", "a new bicycle", "Two Wheels",
            ("My new bicycle is light, fast and bright red.",
             "I ride it to work now, and the trip takes twenty minutes.",
             "The gears are really smooth, even on steep hills.",
             "I also bought a lock, a helmet and a small bell.",
             "Riding in the morning just wakes me up better than coffee.",
             "It was a very good purchase, and I am glad I made it."),
            ("check the tyres weekly", "always wear a helmet", "use a solid lock", "oil the chain")),
    Subject("library", "the local library", "Shelves of Stories",
            ("The library on the corner has been open for fifty years.",
             "It lends books, films and even garden tools.",
             "The staff are really kind, and they always suggest something new.",
             "There is also a quiet room for study and a corner for children.",
             "On Tuesdays they run a reading club, and it is very popular.",
             "I just wish more people knew how much it offers."),
            ("get a free card", "join the reading club", "ask the staff", "return books on time")),
    Subject("run", "a morning run", "Before Sunrise",
            ("I run before breakfast, when the streets are empty.",
             "The air is cool, and the light is really soft.",
             "I start slowly, then I pick up the pace near the river.",
             "It is also the only time of day when my phone stays silent.",
             "After the run I feel calm, awake and just a little proud.",
             "A very short run is better than no run at all."),
            ("start slowly", "drink water first", "pick a quiet route", "stretch afterwards")),
    Subject("umbrella", "a lost umbrella", "The Blue Umbrella",
            ("I left my blue umbrella on the bus last Monday.",
             "It was a gift, so I really wanted it back.",
             "I called the bus company, and they just asked me to wait.",
             "Two days later a driver found it under a seat.",
             "The lost property office was also very helpful and friendly.",
             "Now I check my seat, my bag and my pockets every time."),
            ("write your name inside", "check your seat", "call the office", "keep a spare")),
    Subject("cafe", "a new coffee shop", "A Corner Cafe",
            ("A small coffee shop opened at the end of our street.",
             "The owner roasts the beans herself, and the smell is really wonderful.",
             "They also sell fresh bread, soup and a very good cake.",
             "The chairs are old, mismatched and just comfortable.",
             "On rainy days it is full of people reading and talking.",
             "It has quickly become my favourite place to work."),
            ("try the house blend", "go early for a seat", "bring a book", "say hello to the owner")),
    Subject("moving", "moving to a new city", "New Streets",
            ("Moving to a new city was harder than I expected.",
             "I packed my books, plants and kitchen things into forty boxes.",
             "The first week felt really lonely, and I just walked around a lot.",
             "Slowly I found a market, a park and a very friendly bakery.",
             "I also joined a choir, and now I know a few neighbours.",
             "The city is starting to feel like home."),
            ("label every box", "walk your new area", "join a local group", "find a good bakery")),
    Subject("games", "a board game night", "Game Night",
            ("Every Thursday a few friends come over to play board games.",
             "We play strategy games, word games and sometimes a very silly quiz.",
             "Someone always brings snacks, and I just make the tea.",
             "The rules can be confusing, but we really enjoy learning them.",
             "It is also a nice way to stay in touch during busy weeks.",
             "Nobody minds losing, because the evening is the point."),
            ("read the rules first", "keep the snacks simple", "rotate who chooses", "start on time")),
    Subject("coast", "a trip to the coast", "Salt and Wind",
            ("Last summer we took the train to a small town on the coast.",
             "The beach was wide, windy and really beautiful.",
             "We ate fish, walked the cliffs and watched the boats.",
             "The hotel was also very close to the harbour market.",
             "In the evenings we just sat outside and listened to the sea.",
             "I would go back tomorrow if I could."),
            ("book the train early", "pack a warm jacket", "walk the cliff path", "visit the market")),
    Subject("plant", "caring for a houseplant", "One Green Leaf",
            ("My houseplant sits by the kitchen window, where the light is best.",
             "I water it once a week, and I really try not to overdo it.",
             "It grew three new leaves this spring, which made me very happy.",
             "I also turn the pot so that every side gets some sun.",
             "When the leaves droop, it usually just needs a drink.",
             "Caring for it has taught me a little patience."),
            ("water once a week", "turn the pot", "wipe the leaves", "repot in spring")),
)
HELDOUT = frozenset({"library", "umbrella", "coast"})


class Request(NamedTuple):
    id: str              # FORM-SUBJECT
    text: str            # the request the prompt opens with
    opener: str          # the reply's first sentence
    subject: Subject


def requests(split: str) -> list[Request]:
    """The base requests of a split (train: subjects not held out; heldout: the others)."""
    held = split == "heldout"
    return [Request(f"{form}-{s.name}", ask.format(about=s.about), open_.format(about=s.about), s)
            for s in SUBJECTS if (s.name in HELDOUT) == held for form, (ask, open_) in FORMS.items()]


def plain_reply(request: Request) -> str:
    """What a reply that ignores every constraint looks like: the opener and the content."""
    return " ".join((request.opener, *request.subject.sentences))

"""How the package reads text, in Chinese and English alike.

- ``text``: tokens and keywords, normalisation, the words that carry no topic;
- ``entities``: names, places, dates, amounts, ids and e-mails a text mentions;
- ``statements``: what a memory states (subject, attribute, value, polarity) and their slots;
- ``duplicates``: when two memories say the same thing;
- ``vocabulary``: the words that say a value changed, and the kinds of value a text gives, shared by
  the write path (the extractor's templates, formation) and the read path (the prompt's current lines).

May import: the data model (records, errors); every stage reads text through these modules.
"""

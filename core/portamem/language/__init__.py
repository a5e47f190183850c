"""How the package reads text, in Chinese and English alike.

- ``text``: tokens and keywords, normalisation, the words that carry no topic;
- ``entities``: names, places, dates, amounts, ids and e-mails a text mentions;
- ``statements``: what a memory states (subject, attribute, value, polarity) and their slots;
- ``duplicates``: when two memories say the same thing.

May import: the data model (records, errors); every stage reads text through these modules.
"""

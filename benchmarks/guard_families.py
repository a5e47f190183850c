"""How the guard's learned layer does on a family of attacks it was never trained on.

Every attack of the guard's corpora (``tests/data/guard/``, and the texts ``guard_corpus`` generates)
gets a family on four axes:

- **origin**: which file and round, that is who wrote it and how: ``train`` (``train_attacks.jsonl``,
  written for training), ``generated`` (``guard_corpus``, put together from parts), ``direct-dev`` /
  ``direct-heldout`` (``attacks.jsonl``), ``indirect-dev`` / ``indirect-test`` (the 154 shaped
  payloads of ``indirect_attacks.jsonl``), ``varied-1to4`` / ``varied-5`` (its fresh-wording rounds,
  shape ``varied``), ``fresh1``, ``fresh2``, ``fresh3`` (the fresh rounds);
- **goal**: exfiltration, tool misuse, preference hijack, instruction override, phishing or
  promotion, format hijack, planted claim;
- **carrier**: the setting the text itself names (e-mail, web page, table, code, tool output, chat,
  review, calendar, document such as a CV, ticket or invoice), ``none`` when it names none;
- **lang**: en or zh.

Origin and language come from the files. Goal and carrier come from a record's own field where it
has one that says it (``fresh3.jsonl`` carries both; ``indirect_attacks.jsonl``'s shapes,
``attacks.jsonl``'s forms and ``train_attacks.jsonl``'s kinds name a goal for most of their rows,
``GOAL_OF``), and otherwise from the words of the text (``goal_of_words``, ``carrier_of_words``:
first matching pattern, in the order of ``_GOAL_WORDS``, instruction override when none matches).
``python benchmarks/guard_families.py --labels`` writes every label and where it came from. The
words are a rough cut: where a record names its goal, they give the same one for 330 of 683
(58/123 of round 3, whose goals were written with the texts), most of the rest falling back to
instruction override. So the goal families are blurred, and attacks of a left-out goal that the
words put elsewhere stay in training: the left-out figures by goal flatter the model, if anything.

Leave one family out: for each family of an axis the learned layer is trained again, by
``train_guard``'s own corpus and ``fit``, without that family's attacks (alone and placed in a
carrier, written and generated), and every attack of the family is judged alone by the whole guard
(rules and that model) as a user's turn and as web content at the shipped model's thresholds. Beside
it: the pooled figure, each attack judged by the model of a 5-fold split grouped by text (attacks of
the family, but not that one, were trained on; a never-trained attack by the model trained on
everything), and the rules alone. False alarms are counted by each model on ordinary texts that no
model trains on: LoCoMo conversations 3-5, ``ordinary.jsonl``'s held-out lines and the users' turns
of ``hard_negatives.jsonl`` (test) and ``fresh2.jsonl`` as users' turns; the test carriers without a
payload, the web hard negatives (test) and ``fresh2.jsonl``'s web texts and carriers as web content;
and long real web text: the first 3,000 characters of every installed package's README of 300 words
or more (``long_documents``, read in place), as web content.
Each model is one fit of ``train_guard.fit`` with its defaults on all training data (not the shipped
mean of six fits), so the pooled column is the same recipe as every left-out one; thresholds are the
shipped model's. Origin and goal take about 4 CPU minutes (16 minutes of wall time on two busy shared
cores); the results are in docs/security.md.

    python benchmarks/guard_families.py                      # origin and goal
    python benchmarks/guard_families.py --axes origin goal lang carrier
    python benchmarks/guard_families.py --labels families.tsv  # every attack's labels
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import guard_corpus
import guard_eval
import train_guard
from portamem_plugins import guard
from portamem_plugins import injection_model as im

DATA = guard_eval.DATA

GOALS = ("exfiltration", "tool_misuse", "preference_hijack", "instruction_override", "phishing_promotion",
         "format_hijack", "planted_claim")
CARRIERS = ("email", "web", "table", "code", "tool_output", "chat", "review", "calendar", "document", "none")
AXES = ("origin", "goal", "carrier", "lang")

#: the goal a record's kind, form or shape names; kinds that mix goals (memory, respond, task, a style
#: such as polite or question, hidden or encoded forms, the varied rounds) are read from their words
GOAL_OF = {
    # train_attacks.jsonl kinds
    "override": "instruction_override", "role": "instruction_override", "leak": "exfiltration",
    "setup_leak": "exfiltration", "exfil": "exfiltration", "tool": "tool_misuse", "agent_action": "tool_misuse",
    "phish": "phishing_promotion", "format": "format_hijack", "data_poison": "planted_claim",
    # attacks.jsonl forms
    "roleplay": "instruction_override", "exfiltration": "exfiltration",
    # indirect_attacks.jsonl shapes
    "promotion": "phishing_promotion", "phishing": "phishing_promotion", "format_hijack": "format_hijack",
    "data_leak": "exfiltration", "task_hijack": "instruction_override", "misinformation": "planted_claim",
    "response_inject": "planted_claim",
}

_SECRET_EN = (r"password|passcode|api[ -]?key|token|secret|credential|system prompt|hidden prompt|prompt|"
              r"instructions you|developer message|conversation|chat history|history|contacts|address book|"
              r"card number|card details|phone number|home address|address|salary|environ|ssh|files|data|"
              r"location|emails|inbox|attendee list|medical|records|2fa|one-time code|otp|cookies|logs")
_SECRET_ZH = (r"密码|密钥|令牌|系统提示|提示词|隐藏|设置|配置|住址|聊天记录|对话|通讯录|联系人|卡号|银行卡|手机号|电话|地址|邮箱|"
              r"薪资|工资|文件|数据|位置|病历|身份证|验证码|记录|日志")
#: (goal, pattern) in order: the first that matches names the goal, instruction override when none does
_GOAL_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((g, re.compile(p, re.IGNORECASE | re.DOTALL)) for g, p in (
    ("exfiltration", (
     rf"\b(?:send|forward|e-?mail|post|upload|shar|leak|reveal|print|list|output|copy|disclos|repeat|attach|"
     rf"cc|bcc|export|dump|paste|read out|tell me|include|append|quote|reply|answer|respond|publish)\w*\b.{{0,60}}"
     rf"\b(?:{_SECRET_EN})s?\b"
     rf"|(?:发送|发到|发给|转发|抄送|上传|泄露|透露|打印|列出|输出|复制|分享|附上|贴出|告诉我|读出|说出|加上|写上|问|公开).{{0,25}}(?:{_SECRET_ZH})"
     rf"|把.{{0,15}}(?:{_SECRET_ZH}).{{0,20}}(?:发送|发到|发给|转发|抄送|上传|贴|附|分享|公开|打印|列出|同步)"
     r"|requests\.post|socket\.|os\.environ|curl .*-d")),
    ("phishing_promotion", (
     r"\b(?:ask|request|confirm|enter|provide|type|re-?enter|update)\b.{0,50}\b(?:card number|cvv|pin|password|"
     r"bank details|card details|login|credentials|security code)\b"
     r"|(?:输入|提供|确认|填写|更新|索要|索取).{0,20}(?:卡号|密码|验证码|银行卡|支付信息|账户信息|安全码)")),
    ("tool_misuse", (
     r"(?<![\w.-])(?:delete|remove|wipe|erase|install|download|transfer|wire|pay|purchase|book|cancel|approve|refund|"
     r"unsubscribe|grant|disable|turn off|reset|merge|push|deploy|rm -rf|subprocess|os\.system|shutil|chmod|"
     r"rename|archive|decline|(?:run|execute)\b.{0,30}\b(?:command|script|code|binary|installer|program|"
     r"shell|sh|bash|curl|wget)|mark .{0,20} as paid|close the (?:ticket|account))(?![\w.-])"
     r"|删除|清空|安装|下载|转账|汇款|支付|付款|预订|取消订|批准|退款|禁用|重置|合并|部署|接受邀请|"
     r"关闭(?:杀毒|防火墙|验证|两步|提醒|通知|过滤|安全)|(?:执行|运行)(?:命令|脚本|代码|以下命令|这段)")),
    ("preference_hijack", (
     r"\b(?:the (?:user|customer|traveller|traveler|reader|person|owner|patient|client)s? (?:prefers?|likes?|wants?|"
     r"has asked|would like|loves?|always|only)|always (?:recommend|suggest|choose|pick|rank|prefer)|"
     r"only (?:show|recommend|suggest|list|mention)|rank .{0,40} (?:first|top|highest)|preferred (?:vendor|brand|"
     r"store|shop|airline|hotel))\b"
     r"|(?:用户|客户|读者|旅客|主人|病人)(?:喜欢|偏好|希望|想要|要求|更喜欢|一直|只)|只推荐|只显示|只展示|排第一|排在第一|优先推荐")),
    ("phishing_promotion", (
     r"https?://|www\.|\.example\b|\bt\.me/|\b[a-z0-9-]+\.(?:com|net|org|io|cn|ru|xyz|top|ly|biz)\b"
     r"|\b(?:link|recommend|promote|buy|discount|coupon|visit|click|sign up|deal|telegram|whatsapp|"
     r"verify (?:your|their)|log ?in|bank details|card details|reward|prize|giveaway|subscribe)\b"
     r"|链接|网址|推荐|购买|优惠|访问|点击|领取|登录|验证(?:账户|账号|身份|银行卡|信息)|重新验证|红包|折扣|中奖|关注|加群|微信群")),
    ("format_hijack", (
     r"\b(?:answer|reply|respond|write|render|output|speak|talk)\b.{0,40}\b(?:in (?:french|spanish|german|"
     r"klingon|pirate|latin|italian|japanese|chinese|english|all caps|uppercase|capitals|rhyme|verse|json|"
     r"emoji|morse|base64|hex|hexadecimal|haiku|shakespearean)|only with|exclusively|only the word|with the phrase|backwards)\b"
     r"|\btranslate (?:your|the|every|all) (?:answer|reply|response|output)"
     r"|(?:用|以)(?:英文|英语|法语|日语|文言文|大写|表情|押韵|诗|火星文)|(?:只|仅)(?:回复|回答|输出)|翻译成|译成|倒着|反着写")),
    ("planted_claim", (
     r"\b(?:remember|note that|store|keep in mind|save (?:this|that)|is (?:safe|trusted|verified|official|"
     r"legitimate|fake|a scam|recalled|closed|discontinued)|has been (?:verified|approved|recalled|closed|"
     r"cancelled)|say that|tell (?:the user|them|readers|the reader|everyone) that|mention that|state that|"
     r"(?:reply|respond|answer|say|saying|state|claim)\w* (?:that|it|this)\b|\bby saying|fake|"
     r"report .{0,30} as|claim|say (?:it|this|that)|(?:it|this) is an? official|treat .{0,40} as (?:trusted|fact|official)|as a fact|verified information)\b"
     r"|记住|存入|存进|写进|写入|知识库|记录|报告|说成|已(?:核实|验证|确认|召回|停产)|是(?:安全|可信|官方|骗子|假的)|告诉用户|告诉读者|说|声称|当作事实|当作可信|当成事实")),
))
_CARRIER_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p, re.IGNORECASE)) for c, p in (
    ("calendar", r"\b(?:calendar|invite|invitation|meeting|event|agenda|rsvp)\b|日历|会议|邀请|日程"),
    ("email", r"\b(?:(?:this|the) e-?mail|inbox|subject:|mailbox|newsletter)\b|邮件"),
    ("review", r"\b(?:review|rating|stars|testimonial)s?\b|评价|评论|好评|差评|点评"),
    ("table", r"\b(?:spreadsheet|table|cell|column|csv|sheet|row)s?\b|表格|单元格|这一列|工作表"),
    ("code", (r"\b(?:code|comment|readme|function|script|repo|repository|commit|pull request|docstring|"
             r"package)\b|```|import |代码|注释|仓库|函数|脚本")),
    ("tool_output", r"\b(?:tool|api|search result|json|plugin|query result|function call)s?\b|工具|接口|搜索结果|返回结果|插件"),
    ("chat", r"\b(?:chat|thread|channel|slack|group chat|dm|forum|post|tweet)s?\b|群聊|频道|聊天|帖子|群里|论坛"),
    ("document", (r"\b(?:pdf|resume|cv|document|form|invoice|ticket|wiki|contract|transcript|report|policy|"
                 r"attachment|file)s?\b|简历|文档|发票|工单|表单|合同|报告|附件|记录稿")),
    ("web", (r"\b(?:page|site|website|web|article|listing|product|crawler|browse|blog|snippet|search)s?\b"
            r"|网页|页面|网站|文章|商品|爬虫|本页|博客|搜索")),
))


def goal_of_words(text: str) -> str:
    for goal, pattern in _GOAL_WORDS:
        if pattern.search(text):
            return goal
    return "instruction_override"


def carrier_of_words(text: str) -> str:
    for carrier, pattern in _CARRIER_WORDS:
        if pattern.search(text):
            return carrier
    return "none"


@dataclass(frozen=True)
class Attack:
    """One attack of the corpora with its family on every axis, and whether the shipped model trained on it."""

    text: str
    lang: str
    origin: str
    goal: str
    carrier: str
    trained: bool
    #: where the goal came from: the record's "field" or its "words"
    goal_by: str = "words"
    #: what kind of family a fresh3 row belongs to (report_style, long_document, user_fact), else ""
    family: str = ""

    def axis(self, name: str) -> str:
        return str(getattr(self, name))


def _attack(text: str, lang: str, origin: str, trained: bool, named: str | None = None, carrier: str | None = None,
            family: str = "") -> Attack:
    goal = named if named in GOALS else GOAL_OF.get(named or "")
    return Attack(text, lang, origin, goal or goal_of_words(text), carrier or carrier_of_words(text), trained,
                  "field" if goal else "words", family)


def _jsonl(path: Path) -> list[dict]:
    return guard_eval._jsonl(path)


def attacks(generated: int = 1500, seed: int = 7) -> list[Attack]:
    """Every attack of the corpora, written ones first, then the ``generated`` ones ``train_guard`` draws."""
    out: list[Attack] = []
    for r in _jsonl(DATA / "train_attacks.jsonl"):
        out.append(_attack(r["text"], r["lang"], "train", True, r["kind"],
                           "web" if r["kind"] == "hidden_html" else None))
    for r in _jsonl(DATA / "attacks.jsonl"):
        trained = r["split"] == "dev" and r["form"] not in ("hidden_markup", "encoded")
        out.append(_attack(r["text"], r["lang"], f"direct-{r['split']}", trained, r["form"],
                           "web" if r["form"] == "hidden_markup" else None))
    for r in _jsonl(DATA / "indirect_attacks.jsonl"):
        varied = r["shape"] == "varied"
        origin = ("varied-1to4" if r["split"] == "dev" else "varied-5") if varied else f"indirect-{r['split']}"
        out.append(_attack(r["text"], r["lang"], origin, r["split"] == "dev", r["shape"],
                           "code" if r["shape"] == "code" else None))
    for round_, name in guard_eval.FRESH_ROUNDS.items():
        for r in _jsonl(DATA / name):
            if r["type"] == "attack":
                out.append(_attack(r["text"], r["lang"], f"fresh{round_}", round_ == "1", r.get("goal"),
                                   r.get("carrier"), r.get("family", "")))
    for text, lang in guard_corpus.attacks(random.Random(seed + 2), generated):
        out.append(_attack(text, lang, "generated", True))
    return out


# ---------------------------------------------------------------------- ordinary texts no model trains on
def held_out_ordinary() -> tuple[list[str], list[str]]:
    """(users' turns, web and tool texts) that neither ``train_guard`` nor the shipped rules' dev split holds."""
    users = [s.text for s in guard_eval.load_ordinary() if s.split == "heldout"]
    web: list[str] = []
    for r in _jsonl(DATA / "hard_negatives.jsonl"):
        if r["split"] == "test":
            (users if r["source"] == "user" else web).append(r["text"])
    web += [r["text"].replace("{attack}", "").strip() for r in _jsonl(DATA / "carriers.jsonl") if r["split"] == "test"]
    for r in _jsonl(DATA / "fresh2.jsonl"):
        if r["type"] == "ordinary":
            (users if r["source"] == "user" else web).append(r["text"])
        elif r["type"] == "carrier":
            web.append(r["text"].replace("{attack}", "").strip())
    return users, web


#: how much of each README is judged: a long page, as an agent would fetch it
README_CHARS = 3000


def long_documents(min_words: int = 300) -> list[str]:
    """The first ``README_CHARS`` characters of every installed package's description of ``min_words`` or more.

    Real long web texts that nobody wrote for this project (installation notes, usage, links, code),
    read in place from the environment; how many depends on what is installed.
    """
    from importlib import metadata

    out: dict[str, str] = {}
    for dist in metadata.distributions():
        body = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else None  # type: ignore[attr-defined]
        name = dist.metadata["Name"] or ""
        if isinstance(body, str) and len(body.split()) >= min_words and name.lower() not in out:
            out[name.lower()] = body[:README_CHARS]
    return [out[k] for k in sorted(out)]


# ---------------------------------------------------------------------- training without a family
class Trainer:
    """``train_guard``'s corpus, each of its attack groups labelled by family, and one fit without any of them."""

    def __init__(self, seed: int = 7, generated: int = 1500) -> None:
        self.seed = seed
        self.corpus = train_guard.build(seed, generated)
        by_view: dict[str, Attack] = {}
        for a in attacks(generated, seed):
            by_view.setdefault(guard.normalize(a.text).strip(), a)
        self.group_of: dict[int, Attack] = {}
        missing = 0
        for t in self.corpus.texts:
            if t.attack and t.span == (0, len(t.view)):
                a = by_view.get(t.view)
                if a is None:
                    missing += 1
                    a = _attack(t.view, t.lang, "generated" if t.generated else "train", True)
                self.group_of[t.group] = a
        #: attacks trained on whose text no corpus file holds as written (should be none)
        self.unmatched = missing
        self.groups = sorted({t.group for t in self.corpus.texts})
        shipped = im.load()
        assert shipped is not None, "the shipped model is missing"
        self.thresholds = (shipped.user_threshold, shipped.data_threshold)

    def fit(self, drop: set[int] | None = None, seed_offset: int = 0) -> im.Model:
        keep = set(self.groups) - (drop or set())
        feats, y = train_guard.examples(self.corpus, keep)
        w, b = train_guard.fit(feats, y, l2=1e-5, epochs=6, lr=0.05, seed=self.seed + seed_offset)
        return im.Model(w.astype(np.float32), b, *self.thresholds)

    def family_groups(self, axis: str, family: str) -> set[int]:
        return {g for g, a in self.group_of.items() if a.axis(axis) == family}


def _verdicts(model: im.Model | None, texts: list[str], source: str) -> list[bool]:
    """The whole guard's verdicts with ``model`` as its learned layer (None: the rules alone)."""
    loader = guard.injection_model.load
    guard.injection_model.load = lambda: model  # type: ignore[assignment]
    try:
        return [guard.judge(t, source) is not None for t in texts]
    finally:
        guard.injection_model.load = loader  # type: ignore[assignment]


@dataclass
class Row:
    family: str
    n: int
    trained: int
    #: (user, web) hits: left out, pooled, rules alone
    left_out: tuple[int, int]
    pooled: tuple[int, int]
    rules: tuple[int, int]
    #: false alarms of the left-out model: users' turns, web texts, long documents
    alarms: tuple[int, int, int]
    #: with a second detector (``--vectors``): its hits alone, the guard's or its, and their false alarms
    extra: tuple[int, int] | None = None
    both: tuple[int, int] | None = None
    extra_alarms: tuple[int, int, int] | None = None
    both_alarms: tuple[int, int, int] | None = None


#: a second detector trained without some groups of ``Trainer``'s corpus: (dropped groups) -> texts -> flags
Extra = Callable[[set[int]], Callable[[list[str]], list[bool]]]


def run(axes: list[str], seed: int = 7, generated: int = 1500, log=print,  # type: ignore[no-untyped-def]
        extra: Callable[[Trainer], Extra] | None = None) -> tuple[dict[str, list[Row]], dict]:
    """The tables; ``extra`` builds a second detector on the trainer, reported alone and or-ed with the guard."""
    t0 = time.time()
    trainer = Trainer(seed, generated)
    second = extra(trainer) if extra is not None else None
    written = [a for a in attacks(generated, seed) if a.origin != "generated"]
    users, web = held_out_ordinary()
    docs = long_documents()
    log(f"{len(trainer.corpus.texts)} training texts, {len(trainer.group_of)} attack groups "
        f"({trainer.unmatched} unmatched); {len(written)} written attacks; held-out ordinary: {len(users)} users' "
        f"turns, {len(web)} web texts, {len(docs)} READMEs; thresholds user {trainer.thresholds[0]:.3f}, "
        f"data {trainer.thresholds[1]:.3f}")

    def alarm_flags(model: im.Model | None) -> tuple[list[bool], list[bool], list[bool]]:
        return _verdicts(model, users, "user"), _verdicts(model, web, "web"), _verdicts(model, docs, "web")

    def alarms(model: im.Model | None) -> tuple[int, int, int]:
        return tuple(sum(f) for f in alarm_flags(model))  # type: ignore[return-value]

    def hits(model: im.Model | None, pick: list[Attack]) -> tuple[list[bool], list[bool]]:
        texts = [a.text for a in pick]
        return _verdicts(model, texts, "user"), _verdicts(model, texts, "web")

    # pooled: a 5-fold split over the training groups; attacks no fold trains on go to the full model
    full = trainer.fit()
    rng = random.Random(seed)
    groups = list(trainer.groups)
    rng.shuffle(groups)
    folds = [set(groups[i::5]) for i in range(5)]
    view_group = {guard.normalize(a.text).strip(): g for g, a in trainer.group_of.items()}
    pooled: dict[int, tuple[bool, bool]] = {}
    owner = {i: next((k for k, f in enumerate(folds) if view_group.get(guard.normalize(a.text).strip()) in f), None)
             for i, a in enumerate(written)}
    for k in [*range(5), None]:
        model = full if k is None else trainer.fit(folds[k], seed_offset=k + 1)
        idx = [i for i, o in owner.items() if o == k]
        u, w = hits(model, [written[i] for i in idx])
        pooled.update({i: (x, y) for i, x, y in zip(idx, u, w)})
        log(f"  pooled fold {'all' if k is None else k + 1}: {len(idx)} attacks judged, {time.time() - t0:.0f}s")
    ru, rw = hits(None, written)
    rules = {i: (x, y) for i, (x, y) in enumerate(zip(ru, rw))}
    base = {"pooled_alarms": alarms(full), "rules_alarms": alarms(None), "users": len(users), "web": len(web),
            "docs": len(docs),
            "pooled_all": (sum(p[0] for p in pooled.values()), sum(p[1] for p in pooled.values())),
            "rules_all": (sum(ru), sum(rw)), "n": len(written)}

    tables: dict[str, list[Row]] = {}
    for axis in axes:
        rows = []
        for family in sorted({a.axis(axis) for a in written}):
            idx = [i for i, a in enumerate(written) if a.axis(axis) == family]
            drop = trainer.family_groups(axis, family)
            model = trainer.fit(drop) if drop else full
            u, w = hits(model, [written[i] for i in idx])
            row = Row(family, len(idx), sum(written[i].trained for i in idx), (sum(u), sum(w)),
                      (sum(pooled[i][0] for i in idx), sum(pooled[i][1] for i in idx)),
                      (sum(rules[i][0] for i in idx), sum(rules[i][1] for i in idx)),
                      alarms(model) if drop else base["pooled_alarms"])
            if second is not None:
                flags = second(drop)
                v = flags([written[i].text for i in idx])
                row.extra = (sum(v), sum(v))
                row.both = (sum(a or b for a, b in zip(u, v)), sum(a or b for a, b in zip(w, v)))
                guard_alarms = alarm_flags(model)
                extra_alarms = (flags(users), flags(web), flags(docs))
                row.extra_alarms = tuple(sum(f) for f in extra_alarms)  # type: ignore[assignment]
                row.both_alarms = tuple(sum(a or b for a, b in zip(g, e))  # type: ignore[assignment]
                                        for g, e in zip(guard_alarms, extra_alarms))
            rows.append(row)
            log(f"  {axis} {family}: {len(drop)} groups left out, {time.time() - t0:.0f}s")
        tables[axis] = rows
    return tables, base


def _pct(num: int, den: int) -> str:
    return f"{num}/{den} ({100 * num / den:.1f}%)" if den else "-"


def print_tables(tables: dict[str, list[Row]], base: dict, out=print) -> None:  # type: ignore[no-untyped-def]
    nu, nw, nd = base["users"], base["web"], base["docs"]
    pu, pw = base["pooled_all"]
    out(f"\npooled (5-fold): {_pct(pu, base['n'])} as a user's turn, {_pct(pw, base['n'])} as web content; rules alone "
        f"{_pct(base['rules_all'][0], base['n'])}, {_pct(base['rules_all'][1], base['n'])}; false alarms of the model "
        f"trained on everything: users' turns {_pct(base['pooled_alarms'][0], nu)}, web texts "
        f"{_pct(base['pooled_alarms'][1], nw)}, READMEs as web {_pct(base['pooled_alarms'][2], nd)} (rules alone "
        f"{base['rules_alarms'][0]}, {base['rules_alarms'][1]}, {base['rules_alarms'][2]})")
    for axis, rows in tables.items():
        out(f"\nleave one {axis} out (guard = rules + a model trained without the family)")
        out("| family | attacks (trained in pooled) | as user: left out | pooled | rules | as web: left out | pooled "
            "| rules | false alarms of the left-out model: users' turns, web, READMEs |")
        out("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            out(f"| {r.family} | {r.n} ({r.trained}) | {_pct(r.left_out[0], r.n)} | {_pct(r.pooled[0], r.n)} | "
                f"{_pct(r.rules[0], r.n)} | {_pct(r.left_out[1], r.n)} | {_pct(r.pooled[1], r.n)} | "
                f"{_pct(r.rules[1], r.n)} | {r.alarms[0]}/{nu}, {r.alarms[1]}/{nw}, {r.alarms[2]}/{nd} |")
        trained = [r for r in rows if r.trained]
        if trained:
            n = sum(r.n for r in trained)
            lu, lw = sum(r.left_out[0] for r in trained), sum(r.left_out[1] for r in trained)
            qu, qw = sum(r.pooled[0] for r in trained), sum(r.pooled[1] for r in trained)
            out(f"| families with trained attacks, together | {n} | {_pct(lu, n)} | {_pct(qu, n)} | | "
                f"{_pct(lw, n)} | {_pct(qw, n)} | | |")
        if any(r.extra is not None for r in rows):
            out(f"\nleave one {axis} out, the second detector alone and or-ed with the guard (the same left-out training)")
            out("| family | attacks | alone | guard or it, as user | as web | false alarms alone: users' turns, web, "
                "READMEs | guard or it |")
            out("|---|---|---|---|---|---|---|")
            for r in rows:
                assert r.extra is not None and r.both is not None and r.extra_alarms and r.both_alarms
                out(f"| {r.family} | {r.n} | {_pct(r.extra[0], r.n)} | {_pct(r.both[0], r.n)} | {_pct(r.both[1], r.n)} "
                    f"| {r.extra_alarms[0]}/{nu}, {r.extra_alarms[1]}/{nw}, {r.extra_alarms[2]}/{nd} "
                    f"| {r.both_alarms[0]}/{nu}, {r.both_alarms[1]}/{nw}, {r.both_alarms[2]}/{nd} |")


def write_labels(path: Path, generated: int) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("origin\tlang\tgoal\tgoal_by\tcarrier\ttrained\ttext\n")
        for a in attacks(generated):
            text = " ".join(a.text.split())
            fh.write(f"{a.origin}\t{a.lang}\t{a.goal}\t{a.goal_by}\t{a.carrier}\t{int(a.trained)}\t{text}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--axes", nargs="+", choices=AXES, default=["origin", "goal"])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--generated", type=int, default=1500, help="generated texts per language and class")
    ap.add_argument("--labels", type=Path, help="write every attack's labels to this TSV file and stop")
    args = ap.parse_args(argv)
    if args.labels:
        write_labels(args.labels, args.generated)
        return 0
    everything = attacks(args.generated, args.seed)
    for axis in AXES:
        counts = Counter(a.axis(axis) for a in everything)
        print(f"{axis}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print("goal from the record's field: " + str(sum(a.goal_by == "field" for a in everything)) + ", from its words: "
          + str(sum(a.goal_by == "words" for a in everything)))
    named = [a for a in everything if a.goal_by == "field"]
    agree = [goal_of_words(a.text) == a.goal for a in named]
    fresh3 = [x for a, x in zip(named, agree) if a.origin == "fresh3"]
    print(f"the words give the goal a record names itself for {sum(agree)}/{len(agree)} of them "
          f"({sum(fresh3)}/{len(fresh3)} of round 3, whose goals were written with the texts)")
    tables, base = run(args.axes, args.seed, args.generated)
    print_tables(tables, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

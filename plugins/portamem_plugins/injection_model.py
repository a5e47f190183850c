"""A learned injection detector: a linear model on hashed n-grams, words and concepts, English and Chinese.

The phrase rules and the structural reading of ``directives`` catch the wordings they were written
for; this model reads, in each sentence and each pair of neighbouring sentences of the guard's
normalised text, the character n-grams (1 to 4 characters, digits folded to ``0``), the Latin
words and pairs of neighbouring words, and the concepts the words stand for (``ignore``, ``rules``,
``the assistant``, ``the user``, ``send``, ``a secret`` ... in both languages) with each pair of
concepts that follow each other, and scores the likeliest window. A long text is judged for its
number of windows (``WINDOW_REF``), and beyond ``PAGE_CHARS`` (a page, not a message) only by a window
that speaks to or of the assistant or asks for what an injection is after (``aimed``): an ordinary
page's hundred sentences and its orders to its own reader ("install with pip", "fill the kettle") are
not an injection however one of them scores. Every feature is hashed into
``2**BITS`` buckets; the weights (int8 with one scale), the bias and the two thresholds ship beside
this module in ``injection_model.npz``, trained by ``benchmarks/train_guard.py``.

Cost: one pass of vectorised hashing over the text, a word scan and a prefix sum, so a window
costs O(1); about a tenth of a millisecond for a turn, a few for 8,000 characters. No embedder is
involved.

The features and the windows are defined here only; the training script calls the same functions,
so the model scores at run time exactly the features it was trained on.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["BITS", "NGRAMS", "Model", "Window", "load", "grams", "windows", "example_features", "MAX_CHARS",
           "WINDOW_REF", "PAGE_CHARS", "aimed"]

#: hash buckets: 2**BITS
BITS = 18
#: character n-gram lengths
NGRAMS = (1, 2, 3, 4)
#: a window's features are divided by sqrt(max(its n-gram count, MIN_GRAMS)): a very short
#: sentence ("ok.") is not scored on a handful of n-grams as if they were a whole text
MIN_GRAMS = 40
#: a sentence longer than this is read in pieces of it that overlap by half
MAX_UNIT = 240
#: the whole text is one more window when it is at most this long
WHOLE_MAX = 600
#: characters read: the guard's content limit
MAX_CHARS = 20_000
#: windows of a text up to which the thresholds hold as chosen; a text with more (a long page) has its
#: likeliest window's log-odds lowered by log(windows / WINDOW_REF). The thresholds were chosen on
#: texts of a few windows, where they flag 1 % of ordinary text; the likeliest of a hundred windows of
#: an ordinary page crosses them far more often than one window does, so the bar rises with the number
#: of chances (a Sidak-style correction: for a small per-window rate, n windows flag about n times as
#: often, and the logistic tail's odds scale the same way). Chosen on the standard library's docstrings
#: (``benchmarks/guard_documents.py --calibration``: 482 of 100 words or more, never trained on) with the
#: dev payloads of the indirect corpus placed in them: 84 docstrings flagged by the model without it,
#: 79 at 60, 60 at 30, the payloads caught 134/135 at each; 30 loses one order hidden in 7,600 characters
#: (``test_guard.test_the_learned_window_is_quoted_and_long_text_costs_little``), 60 keeps it. No written
#: attack alone has more than 16 windows, so what the model catches in a message is unchanged
WINDOW_REF = 60

_MULT = np.uint64(0x100000001B3)
_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_SEEDS = {n: np.uint64(0x9E3779B97F4A7C15 * n % 2**64) for n in range(1, 8)}
_SHIFT = np.uint64(64 - BITS)
_S33 = np.uint64(33)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|[\n。！？；;]+")
_DIGIT = re.compile(r"\d")
#: Latin words (their unigrams and bigrams are features too)
_WORD = re.compile(r"[a-z0-9']+")
_WORD_SEED = 0x5BD1E995

#: what a word is about, in English and Chinese: the model learns the weight of each concept and of
#: each pair of concepts that follow each other, so that a synonym it was not trained on ("scrap your
#: orders", "rescind the guidance") counts as the words it was ("ignore your instructions")
_CONCEPTS: dict[str, tuple[str, str]] = {
    # name: (English words, a regex alternation; Chinese words)
    "IGNORE": (r"ignor\w*|disregard\w*|forget\w*|forgot\w*|skip\w*|bypass\w*|overrid\w*|overrul\w*|neglect\w*|abandon\w*|"
               r"discard\w*|dismiss\w*|drop\w*|scrap\w*|cancel\w*|void\w*|rescind\w*|revok\w*|suspend\w*|withdraw\w*|"
               r"lift(?:ed)?|disabl\w*|set aside|nullif\w*|obsolete|invalid\w*|outdated|supersed\w*|no longer|"
               r"stop following|don't follow|do not follow|throw out|wipe\w*|reset",
               r"忽略|忽视|忽視|无视|無視|忘记|忘記|忘掉|跳过|跳過|绕过|繞過|不要理会|别管|別管|不用管|不要管|不管|作废|作廢|失效|撤销|"
               r"撤銷|覆盖|覆蓋|放一边|放一邊|抛开|拋開|不再遵守|不用遵守|别听|別聽|不算数|不算數|不适用|不適用|清空|无效|無效|不用理"),
    "PRIOR": (r"previous\w*|prior|earlier|above|preceding|former\w*|original\w*|initial\w*|old|before|existing|default|"
              r"first|factory|hidden|secret|confidential|internal",
              r"之前|以前|先前|上面|以上|前面|原来|原來|原先|原有|原本|默认|默認|初始|旧的|舊的|隐藏|隱藏|保密|内部|內部"),
    "RULES": (r"instruction\w*|rule\w*|guideline\w*|directive\w*|orders?|programming|polic\w+|guidance|prompts?|preprompt|"
              r"persona|configuration|config|constraint\w*|restriction\w*|filters?|safeguard\w*|guardrail\w*|principles?|"
              r"settings?|objective\w*|ethic\w*|limits?|limitations?|safety",
              r"指令|指示|命令|规则|規則|规矩|規矩|设定|設定|提示词|提示詞|约束|約束|限制|规定|規定|政策|准则|準則|守则|守則|"
              r"人设|人設|配置|安全检查|安全檢查|过滤|過濾|审查|審查|道德"),
    "AI": (r"assistants?|ai|models?|llms?|chatbots?|bots?|agents?|gpt\w*|chatgpt|claude|copilot|gemini|"
           r"language models?|summari[sz]er|grader\w*|reviewers?|crawlers?|automated",
           r"助手|AI|ai|模型|机器人|機器人|智能体|智能體|代理|GPT|gpt|语言模型|語言模型|阅卷|閱卷|自动审核|自動審核"),
    "YOU": (r"you|your|yours|yourself", r"你|您"),
    "USER": (r"users?|customers?|readers?|visitors?|whoever|anyone|everyone|the person|people|recipients?|candidates?",
             r"用户|用戶|客户|客戶|读者|讀者|对方|對方|访客|訪客|任何人|别人|別人|候选人|候選人|他们|他們"),
    "OUTPUT": (r"answers?|responses?|repl(?:y|ies)|outputs?|summar(?:y|ies)|messages?|translations?|completions?|"
               r"respond\w*|answering|replying",
               r"回答|回复|回覆|答复|答覆|输出|輸出|总结|總結|摘要|回应|回應|消息"),
    "SEND": (r"send\w*|sent|forward\w*|post\w*|upload\w*|email\w*|e-mail\w*|transmit\w*|shar(?:e|es|ed|ing)|leak\w*|"
             r"exfiltrat\w*|submit\w*|cop(?:y|ies|ied)|bcc|cc|publish\w*|embed\w*|append\w*|attach\w*",
             r"发送|發送|发到|發到|发给|發給|转发|轉發|上传|上傳|分享|抄送|泄露|洩露|提交|传到|傳到|传给|傳給|公开|公開|拼到|附上|发出去|發出去"),
    "SECRET": (r"passwords?|pins?|cvv|cvc|credentials?|tokens?|api keys?|keys?|secrets?|otp|one-time|codes?|passphrase\w*|"
               r"card numbers?|card details|ssn|logins?|security answers?|recovery phrase|cookies?|env\w*|ssh",
               r"密码|密碼|验证码|驗證碼|卡号|卡號|安全码|安全碼|密钥|密鑰|令牌|口令|助记词|助記詞|身份证|身份證|登录信息|登錄信息|银行卡|銀行卡"),
    "PRIVATE": (r"address\w*|phone\w*|contacts?|locations?|history|chat|conversations?|logs?|transcripts?|files?|documents?|"
                r"calendar|inbox|notes?|memor(?:y|ies)|data|details|records?|profile|everything",
                r"地址|住址|手机号|手機號|电话|電話|通讯录|通訊錄|联系人|聯繫人|位置|聊天记录|聊天記錄|对话|對話|记录|記錄|文件|日程|"
                r"收件箱|记忆|記憶|资料|資料|信息|数据|數據|网盘|網盤"),
    "REVEAL": (r"reveal\w*|print\w*|output|show\w*|repeat\w*|dump\w*|echo\w*|display\w*|quot(?:e|es|ing)|disclos\w*|"
               r"expos\w*|recit\w*|spell\w*|verbatim|word for word|export\w*",
               r"打印|输出|輸出|显示|顯示|说出|說出|告诉我|告訴我|透露|念给|念給|列出|重复|重複|展示|导出|導出|亮出|原封不动|原封不動|逐字"),
    "SYSTEM": (r"system|developers?|admin\w*|operators?|root|sudo|platform|official|debug|maintenance|jailbr\w*|"
               r"unrestricted|unfiltered|uncensored|dan|god mode|developer mode|override code|management|compliance|"
               r"security team|authori[sz]\w*",
               r"系统|系統|开发者|開發者|管理员|管理員|运营|運營|官方|平台|维护模式|維護模式|调试|調試|越狱|越獄|无限制|無限制|"
               r"不受限制|上帝模式|授权|授權|合规|合規|安全团队|安全團隊"),
    "TOOL": (r"tools?|call|invoke\w*|execut\w*|run|running|commands?|shell|terminal|scripts?|functions?|api|curl|wget|bash|"
             r"sql|payload|decod\w*|install\w*|download\w*",
             r"工具|调用|調用|执行|執行|运行|運行|命令|终端|終端|脚本|腳本|接口|解码|解碼|下载|下載|安装|安裝"),
    "NOW": (r"now|henceforth|onwards?|instead|only|always|never|every|whenever|from here|going forward|immediately|"
            r"this one time|for the rest",
            r"从现在|從現在|以后|以後|今后|今後|立即|马上|馬上|每次|总是|總是|永远|永遠|一律|只用|只能|从此|從此|即日起|不管|无论|無論"),
    "MUST": (r"must|should|shall|required|requires?|needs? to|has to|have to|obliged|expected|are to|is to|mandatory",
             r"必须|必須|务必|務必|应该|應該|须|須|需要|一定|得|应|應"),
    "MONEY": (r"transfer\w*|pay\w*|wire\w*|money|bank\w*|accounts?|refund\w*|gift cards?|crypto\w*|bitcoin|wallet\w*|"
              r"loans?|invoice\w*|fee",
              r"转账|轉賬|转走|轉走|付款|支付|汇款|匯款|银行|銀行|账户|賬戶|退款|购物卡|購物卡|礼品卡|禮品卡|币|幣|钱包|錢包|贷|貸|缴费|繳費"),
    "PROMO": (r"recommend\w*|promot\w*|mention\w*|endors\w*|advertis\w*|prais\w*|best|cheapest|rank\w*|rate|rated|"
              r"five stars|highest|safest|trustworthy|reliable",
              r"推荐|推薦|宣传|宣傳|推广|推廣|最好|最便宜|五星|满分|滿分|最高分|排在第一|最可靠|最安全|值得信赖|值得信賴"),
    "SECRECY": (r"secretly|quietly|silently|covertly|do not tell|don't tell|without telling|keep this secret|"
                r"do not mention|don't mention|never mention|nobody notices|hidden",
                r"悄悄|偷偷|秘密|不要告诉|不要告訴|别告诉|別告訴|保密|不要提|别提|別提|什么都没发生|什麼都沒發生"),
    "PRETEND": (r"pretend\w*|act as|acting as|roleplay\w*|role-play\w*|role|become|simulat\w*|imagine|character|"
                r"personality|you are now|you're now|identity|mode",
                r"扮演|假装|假裝|模拟|模擬|充当|充當|当作|當作|人设|人設|身份|角色|你现在是|你現在是|模式"),
    "CLAIM": (r"say|says|state|states|claim\w*|tell|tells|inform\w*|announc\w*|declar\w*|assert\w*|insist\w*|"
              r"describe\w*|warn\w*|remind\w*|urge\w*|convinc\w*|persuad\w*|let (?:the|them|him|her)",
              r"告诉|告訴|通知|声称|聲稱|说明|說明|提醒|宣称|宣稱|警告|劝|勸|说服|說服|就说|就說|说成|說成|催促"),
    "LINK": (r"links?|click\w*|visit\w*|url\w*|websites?|site|page",
             r"链接|鏈接|网址|網址|点击|點擊|访问|訪問|网站|網站|登录|登錄|页面|頁面"),
    "ME": (r"i|me|my|mine|myself|i'm|i've|i'd|we|our|us",
           r"我|我们|我們|咱们|咱們"),
    # what something can do, is described as doing: product copy and news, not an order
    "CAN": (r"can|could|may|might|lets|allows?|enables?|supports?|helps?|able|now available|available|"
            r"according|found|showed|says|said|reported|study|researchers|announced|launched|feature\w*|"
            r"tutorial|guide|docs|documentation|changelog|release notes|version",
            r"可以|能够|能夠|支持|帮你|幫你|帮助|幫助|研究|发现|發現|显示|顯示|据|據|发布|發佈|推出|功能|教程|指南|文档|文檔|更新说明|更新說明|版本"),
}
_CONCEPT_IDS = {name: i for i, name in enumerate(_CONCEPTS)}
#: a text longer than this (``WHOLE_MAX``: the length beyond which the whole text is no longer one of
#: its windows) is a page rather than a message: in it, the model's window counts only when it is about
#: the assistant or about what an injection is after (``aimed``). No written attack of the corpora is
#: this long alone, so what the model catches in a message is unchanged
PAGE_CHARS = WHOLE_MAX
#: pairs of concepts further apart than this (characters) are not a pair
_PAIR_SPAN = 60
_URL = re.compile(r"https?://|www\.|\b[\w-]+\.(?:example|com|net|org|io|cn|xyz|top|info|biz)\b")


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a regex alternation (``a|b(?:c|d)`` -> ``a``, ``b(?:c|d)``)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(pattern):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
    return [*out, pattern[start:]]


def _compile_concepts() -> tuple[re.Pattern[str], re.Pattern[str], frozenset[str], dict[str, list[tuple[str, int]]]]:
    words, phrases, firsts = [], [], set()
    zh: dict[str, list[tuple[str, int]]] = {}
    for name, (en, chinese) in _CONCEPTS.items():
        single = [a for a in _alternatives(en) if " " not in a]
        multi = [a for a in _alternatives(en) if " " in a]
        words.append(f"(?P<{name}>{'|'.join(single)})")
        if multi:
            phrases.append(f"(?P<{name}>{'|'.join(multi)})")
            firsts.update(m.split(" ")[0].split("(")[0] for m in multi)
        for word in _alternatives(chinese):
            zh.setdefault(word[0], []).append((word, _CONCEPT_IDS[name]))
    for entries in zh.values():
        entries.sort(key=lambda e: -len(e[0]))
    return (re.compile("|".join(words)), re.compile(rf"(?:{'|'.join(phrases)})\b"), frozenset(firsts), zh)


#: a word's concept (fullmatch, cached per word), a phrase's (matched where its first word is), and
#: Chinese words by their first character
_CONCEPT_WORD, _CONCEPT_PHRASE, _PHRASE_FIRST, _ZH_CONCEPTS = _compile_concepts()


@lru_cache(maxsize=65536)
def _word_concept(word: str) -> int:
    m = _CONCEPT_WORD.fullmatch(word)
    return -1 if m is None or m.lastgroup is None else _CONCEPT_IDS[m.lastgroup]


def _concepts(text: str, words: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(position in the framed text, concept) in text order: English words and phrases, links, Chinese words."""
    found: list[tuple[int, int]] = []
    skip_until = -1
    for pos, word in words:
        if pos <= skip_until:
            continue
        if word in _PHRASE_FIRST:
            m = _CONCEPT_PHRASE.match(text, pos - 1)
            if m is not None and m.lastgroup is not None:
                found.append((pos, _CONCEPT_IDS[m.lastgroup]))
                skip_until = m.end()
                continue
        concept = _word_concept(word)
        if concept >= 0:
            found.append((pos, concept))
    link = _CONCEPT_IDS["LINK"]
    found.extend((m.start() + 1, link) for m in _URL.finditer(text))
    for i, ch in enumerate(text):
        entries = _ZH_CONCEPTS.get(ch) if ch >= "\u3400" else None
        if entries:
            for word, concept in entries:
                if text.startswith(word, i):
                    found.append((i + 1, concept))
                    break
    found.sort()
    return found


def _word_features(view: str) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, position in the framed text) of every word, pair of neighbouring words, concept, and
    pair of concepts one or two apart."""
    text = _DIGIT.sub("0", view[:MAX_CHARS])
    words = [(m.start() + 1, m.group(0)) for m in _WORD.finditer(text)]
    buckets = [zlib.crc32(w.encode(), _WORD_SEED) for _, w in words]
    positions = [p for p, _ in words]
    for (p, a), (_, b) in zip(words, words[1:]):
        buckets.append(zlib.crc32(f"{a} {b}".encode(), _WORD_SEED + 1))
        positions.append(p)
    concepts = _concepts(text, words)
    for i, (p, c) in enumerate(concepts):
        buckets.append(zlib.crc32(bytes([c]), _WORD_SEED + 2))
        positions.append(p)
        for gap in (1, 2):
            if i + gap < len(concepts) and concepts[i + gap][0] - p <= _PAIR_SPAN:
                buckets.append(zlib.crc32(bytes([c, concepts[i + gap][1]]), _WORD_SEED + 2 + gap))
                positions.append(p)
    mask = (1 << BITS) - 1
    return np.array(buckets, dtype=np.int64) & mask, np.array(positions, dtype=np.int64)


def _codepoints(view: str) -> np.ndarray:
    """The text framed by newlines (so a sentence's start and end are n-grams too), digits folded to 0."""
    text = "\n" + _DIGIT.sub("0", view[:MAX_CHARS]) + "\n"
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def grams(cps: np.ndarray, n: int) -> np.ndarray:
    """The bucket of every n-gram of the code points, by start position (``len(cps) - n + 1`` of them)."""
    count = len(cps) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = np.full(count, _SEEDS[n], dtype=np.uint64)
        for k in range(n):
            h = h * _MULT + cps[k:k + count]
        h ^= h >> _S33
        h *= _MIX1
        h ^= h >> _S33
        h *= _MIX2
        h ^= h >> _S33
    return (h >> _SHIFT).astype(np.int64)


def example_features(view: str) -> tuple[np.ndarray, np.ndarray]:
    """A whole text as one window, for training: (bucket, value) pairs, values already normalised."""
    cps = _codepoints(view)
    chars = [grams(cps, n) for n in NGRAMS]
    words, _ = _word_features(view)
    buckets = np.concatenate([*chars, words])
    ids, counts = np.unique(buckets, return_counts=True)
    return ids, counts.astype(np.float32) / math.sqrt(max(sum(map(len, chars)), MIN_GRAMS))


@dataclass(frozen=True)
class Window:
    """The likeliest window of a text: its score (a probability) and where it is in the normalised text."""

    probability: float
    start: int
    end: int


def windows(view: str) -> list[tuple[int, int]]:
    """(start, end) of every window in the (unframed) text: each sentence (long ones in overlapping
    pieces), each pair of neighbouring ones, and the whole text when it is short."""
    view = view[:MAX_CHARS]
    units: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCE_END.finditer(view):
        if m.start() > pos:
            units.append((pos, m.start()))
        pos = m.end()
    if pos < len(view):
        units.append((pos, len(view)))
    pieces: list[tuple[int, int]] = []
    step = MAX_UNIT // 2
    for a, b in units:
        if b - a <= MAX_UNIT:
            pieces.append((a, b))
        else:
            pieces.extend((s, min(b, s + MAX_UNIT)) for s in range(a, b - step, step))
    out = pieces + [(pieces[i][0], pieces[i + 1][1]) for i in range(len(pieces) - 1)
                    if pieces[i + 1][1] - pieces[i][0] <= 2 * MAX_UNIT]
    if len(view) <= WHOLE_MAX and (0, len(view)) not in out:
        out.append((0, len(view)))
    return out


class Model:
    """Weights over the hash buckets, a bias, and the thresholds chosen on the dev split."""

    def __init__(self, weights: np.ndarray, bias: float, user_threshold: float, data_threshold: float) -> None:
        self.weights = np.asarray(weights, dtype=np.float32)
        self.bias = float(bias)
        #: probability at or above which a user's own turn is quarantined
        self.user_threshold = float(user_threshold)
        #: the same for web and tool content
        self.data_threshold = float(data_threshold)

    def best_window(self, view: str) -> Window | None:
        """The window of the (normalised) text the model finds likeliest to be an injection; its probability
        is corrected for the number of windows of a long text (``WINDOW_REF``)."""
        spans = windows(view)
        if not spans:
            return None
        cps = _codepoints(view)
        total = len(cps)
        per_position = np.zeros(total + 1, dtype=np.float64)
        for n in NGRAMS:
            g = grams(cps, n)
            per_position[1:len(g) + 1] += self.weights[g]
        words, positions = _word_features(view)
        if len(words):
            per_position += np.bincount(positions + 1, weights=self.weights[words], minlength=total + 1)[:total + 1]
        prefix = np.cumsum(per_position)
        # window (a, b) of the text is positions a+1 .. b of the framed code points; its first
        # window also takes the frame's leading newline, its last the trailing one
        starts = np.array([a if a == 0 else a + 1 for a, _ in spans], dtype=np.int64)
        ends = np.array([b + 2 if b == len(view[:MAX_CHARS]) else b + 1 for _, b in spans], dtype=np.int64)
        lengths = ends - starts
        count = sum(np.maximum(lengths - n + 1, 0) for n in NGRAMS)
        scores = (prefix[ends] - prefix[starts]) / np.sqrt(np.maximum(count, MIN_GRAMS)) + self.bias
        scores -= math.log(max(1.0, len(spans) / WINDOW_REF))
        i = int(np.argmax(scores))
        if len(view) > PAGE_CHARS:
            # a page: its likeliest window aimed at the assistant or at what an injection is after, among
            # those that reach the data threshold (few); when none is, its likeliest below the threshold
            floor = math.log(self.data_threshold / (1.0 - self.data_threshold))
            for j in np.argsort(-scores, kind="stable"):
                if scores[j] < floor or aimed(view[spans[j][0]:spans[j][1]]):
                    i = int(j)
                    break
            else:
                return Window(0.0, 0, 0)
        probability = 1.0 / (1.0 + math.exp(-float(scores[i])))
        return Window(probability, spans[i][0], spans[i][1])


def aimed(window: str) -> bool:
    """Whether a window speaks to or of the assistant, or asks for what an injection is after: the AI or
    the system named, a role to play, secrecy, rules set aside, secrets asked of someone, secrets or private
    data sent or revealed, the assistant's own instructions revealed, memory. A page's orders to its own
    reader ("fill the kettle", "run the tests", "print the report") are none of these."""
    c = {concept for _, concept in _concepts(window, [(m.start() + 1, m.group(0)) for m in _WORD.finditer(window)])}
    has = {name: _CONCEPT_IDS[name] in c for name in _CONCEPTS}
    # the concept of a secret takes any "code" or "key"; here only what is a secret in any page
    has["SECRET"] = has["SECRET"] and _SECRET.search(window) is not None
    addressed = has["YOU"] or has["AI"] or has["SYSTEM"]
    return bool(has["AI"] or has["SYSTEM"] or has["PRETEND"] or has["SECRECY"] or has["IGNORE"] and has["RULES"]
                or has["SEND"] and (has["SECRET"] or has["PRIVATE"] or has["LINK"] or has["MONEY"])
                or (has["YOU"] or has["USER"]) and has["SECRET"]
                or has["REVEAL"] and (has["SECRET"] or has["PRIVATE"] or has["RULES"] and addressed)
                or _MEMORY.search(window) is not None)


#: secrets whatever the page: not a program's "code" or a table's "key"
_SECRET = re.compile(r"\b(?:passwords?|pins?|cvv|cvc|credentials?|api keys?|secret keys?|private keys?|secrets?|otp|"
                     r"one-time|passphrases?|card numbers?|card details|ssn|logins?|security answers?|recovery phrase|"
                     r"(?:verification|security|access|login|one-time|2fa|sms) codes?|code from|session cookies?|"
                     r"ssh keys?|tokens?)\b|密码|密碼|验证码|驗證碼|卡号|卡號|安全码|安全碼|密钥|密鑰|令牌|口令|助记词|助記詞")
#: words about keeping something for later: an injection that plants itself in memory
_MEMORY = re.compile(r"\b(?:remember\w*|memor(?:y|ies|ize|ise)|from now on|in future|in the future|next time|"
                     r"every future|all future)\b|记住|記住|记忆|記憶|以后|以後|今后|今後|从现在起|從現在起")


@lru_cache(maxsize=1)
def load() -> Model | None:
    """The shipped model, or None when its file is missing (the guard then runs its rules alone)."""
    try:
        with resources.files(__package__).joinpath("injection_model.npz").open("rb") as fh, np.load(fh) as data:
            weights = data["weights"].astype(np.float32) * float(data["scale"])
            return Model(weights, float(data["bias"]), float(data["user_threshold"]), float(data["data_threshold"]))
    except FileNotFoundError:
        return None

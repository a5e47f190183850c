"""The guard's rules: instruction-style injection phrases in English and Chinese, each with a weight.

A rule of weight 1.0 quarantines on its own; weaker rules (phrases that ordinary conversation
also uses, such as "you must never" or "系统提示：") quarantine only together. In a pattern, ``~``
stands for a gap between words; the same pattern is also compiled without gaps, for text whose
letters were spaced out ("i g n o r e") and squashed back together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Rule", "RULES", "GAP"]

#: a gap between two words (punctuation allowed, so "ignore, all previous" still matches)
GAP = r"[\s,;:.!'\"\-]+"


@dataclass(frozen=True)
class Rule:
    """One pattern. ``label`` is what a reviewer reads in the quarantine reason."""

    name: str
    label: str
    weight: float
    pattern: re.Pattern[str]
    #: the pattern without word gaps, for squashed text; None where that would be too loose
    compact: re.Pattern[str] | None
    #: Latin-script rule: also tried on reversed, rot13 and leetspeak views
    latin: bool


#: "up to n skipped words", rewritten for squashed text as a bounded run of letters (no nested repeats)
_SKIP = re.compile(r"\(\?:(?:\\w\+~|~\\w\+)\)(?:\{0,(\d+)\}\??|\?)")


def _compact(pattern: str) -> str:
    pattern = _SKIP.sub(lambda m: rf"\w{{0,{12 * int(m.group(1) or 1)}}}?", pattern)
    return pattern.replace("~?", "").replace("~", "").replace(r"\b", "")


def _rule(name: str, label: str, weight: float, pattern: str, *, compact: bool = True) -> Rule:
    latin = not re.search(r"[\u3400-\u9fff]", pattern)
    full = re.compile(pattern.replace("~", GAP), re.I)
    squashed = re.compile(_compact(pattern), re.I) if compact else None
    return Rule(name, label, weight, full, squashed, latin)


# ---------------------------------------------------------------------- English building blocks
_VERB = (
    r"(?:ignore|disregard|forget|skip|override|overrule|bypass|neglect|abandon|discard|dismiss|nullify|"
    r"circumvent|throw~away|set~aside|stop~following|stop~obeying|no~longer~follow|do~not~follow|"
    r"never~follow|cease~following)"
)
_DET = r"(?:all|any|the|your|my|of|every|each|these|those|such)"
_MOD = (
    r"(?:previous|previously~given|prior|above|earlier|preceding|former|foregoing|original|initial|"
    r"existing|default|system|safety|developer|openai|built-in|preset|programmed|standing|old)"
)
_OBJ = (
    r"(?:instructions?|rules?|prompts?|directives?|guidelines?|directions?|commands?|orders?|programming|"
    r"constraints?|restrictions?|guardrails?|polic(?:y|ies)|training|filters?|context|conditioning|"
    r"limitations?|protocols?|safeguards?|principles|ethics|settings|messages?|text|conversation)"
)
_STRONG_OBJ = (
    r"(?:instructions|system~prompts?|prompts?|guardrails?|programming|guidelines|directives?|"
    r"restrictions|safeguards|content~polic(?:y|ies)|safety~(?:rules|guidelines|filters?|training|policies))"
)
_AI = r"(?:ai|assistant|chatbot|bot|model|llm|gpt|language~model|agent|system)"
_SUBJ = r"(?:you|the~assistant|assistant|the~ai|the~model|the~bot|chatgpt)"
_AVERB = (
    r"(?:respond|reply|answer|say|output|print|act|behave|pretend|obey|comply|follow~(?:my|these|only|the~new)|"
    r"ignore|refuse|include|add|append|start~(?:every|each|your|all)|end~(?:every|each|your|all)|begin~(?:every|each)|"
    r"recommend|promote|mention|tell~(?:the~)?(?:user|users|everyone|anyone)|address~me|use~only|write~only|"
    r"speak~only|talk~only|call~yourself|be~(?:an?~)?(?:unrestricted|unfiltered|uncensored|dan|evil|jailbroken)|"
    r"disregard|forget|reveal|share|send|never~(?:refuse|warn|mention|reveal|admit|tell|say)|"
    r"always~(?:say|answer|respond|reply|recommend|agree|comply|include))"
)
_TIME = (
    r"(?:from~now~on|from~this~(?:point|moment)~(?:on|forward|onwards?)|from~here~on(?:~out)?|going~forward|"
    r"henceforth|hereafter|starting~(?:now|today|immediately)|from~today~on|for~the~rest~of~(?:this|the)~"
    r"(?:conversation|chat|session)|until~(?:told|i~say)~otherwise)"
)
_FUTURE = (
    r"(?:in|for|on)~(?:all|every|each|any)~(?:(?:future|subsequent|following|later|your)~)?"
    r"(?:responses?|answers?|replies|outputs?|messages?|conversations?|chats?|sessions?|interactions?)"
)
_MEMORY = (
    r"(?:memory|memories|knowledge(?:~base)?|beliefs?|core~facts|long-term~memory|stored~\w+|persona|"
    r"personality|instructions|rules|system~prompt|programming)"
)
_SENSITIVE = (
    r"(?:data|conversations?|chats?|chat~(?:logs?|history)|messages|memories|passwords?|credentials|"
    r"api~keys?|tokens?|secrets|contacts|location|history|logs?|personal~(?:data|information|details)|"
    r"address(?:es)?|card~numbers?)"
)

# ---------------------------------------------------------------------- Chinese building blocks
_ZVERB = (
    r"(?:忽略|忽视|忽視|无视|無視|忘记|忘記|忘掉|跳过|跳過|绕过|繞過|绕开|繞開|不要理会|不要理會|不要理睬|别理会|別理會|"
    r"无需理会|無需理會|不用理会|不必理会|不用管|不要管|抛开|拋開|抛弃|拋棄|丢弃|丟棄|废除|廢除|推翻|覆盖|覆蓋|"
    r"停止遵守|停止遵循|停止执行|停止執行|不再遵守|不再遵循|不要遵守|不必遵守|不用遵守|违背|違背|摆脱|擺脫)"
)
_ZMOD = (
    r"(?:之前|以前|先前|此前|上面|上述|以上|前面|上文|前文|刚才|剛才|原来|原來|原先|原有|原本|现有|現有|默认|默認|"
    r"预设|預設|系统|系統|所有|全部|一切|任何|官方|安全|内置|內置|开发者|開發者|你的|你|您的|初始)"
)
_ZOBJ = (
    r"(?:指令|指示|命令|规则|規則|设定|設定|提示词|提示詞|提示|约束|約束|限制|规定|規定|安全策略|策略|政策|准则|準則|"
    r"守则|守則|协议|協議|人设|人設|底线|底線|道德|审查|審查|过滤|過濾|编程|編程|训练|訓練)"
)
_ZYOU = r"(?:你|您|助手|AI|ai|机器人|機器人|模型)"
_ZMUST = r"(?:必须|必須|只能|只准|一律|务必|務必|不得|不准|不许|不許|永远|永遠|始终|始終|都要|都必须|都必須|绝不|絕不|总是|總是|应当始终)"
_ZACT = (
    r"(?:回答|回复|回覆|答复|答覆|说|說|输出|輸出|称呼|稱呼|叫我|扮演|遵守|遵从|遵從|服从|服從|听从|聽從|执行|執行|忽略|"
    r"拒绝|拒絕|推荐|推薦|宣传|宣傳|提及|告诉|告訴|用英文|用中文|用文言文|用英语|只用|加上|附上|隐藏|隱藏|透露|泄露|"
    r"洩露|假装|假裝|自称|自稱|在每次|在开头|在開頭|在结尾|在結尾|发送|發送)"
)
_ZTIME = (
    r"(?:从现在(?:开始|起)|從現在(?:開始|起)|从今(?:天|日)?(?:以后|往后|起|开始)|從今(?:天)?(?:以後|往後|起|開始)|"
    r"从此(?:以后)?|從此(?:以後)?|今后|今後|往后|往後|以后|以後|接下来|接下來|此后|此後|自此)"
)
_ZMEM = (
    r"(?:记忆|記憶|内存|內存|知识库|知識庫|认知|認知|设定|設定|人设|人設|身份设定|系统提示|系統提示|指令|规则|規則|"
    r"数据库|數據庫|长期记忆|長期記憶)"
)

RULES: tuple[Rule, ...] = (
    # ------------------------------------------------------------------ override earlier instructions
    _rule("override", "instruction override", 1.0,
          rf"\b{_VERB}~(?:{_DET}~){{0,3}}{_MOD}~(?:\w+~)?{_OBJ}\b"),
    _rule("override", "instruction override", 1.0,
          rf"\b{_VERB}~(?:{_DET}~){{0,3}}{_STRONG_OBJ}\b"),
    _rule("override", "instruction override", 1.0,
          rf"\b{_VERB}~(?:all~)?your~(?:\w+~)?{_OBJ}\b"),
    _rule("override", "instruction override", 1.0,
          r"\b(?:ignore|disregard|forget)~(?:all~|everything~|anything~)?(?:of~)?(?:the~|what~is~)?"
          r"(?:above|before~this|previous(?:ly)?|prior|earlier)\b(?!~(?:the|my|our|his|her|their|a|an|\d)\b)"),
    _rule("override", "instruction override", 1.0,
          r"\b(?:forget|ignore|disregard)~(?:everything|all|anything|what)~(?:that~)?you~"
          r"(?:were|have~been|had~been|'ve~been|was)~(?:told|taught|instructed|programmed|given|trained)"),
    _rule("override", "instruction override", 1.0,
          r"\b(?:you~are|you~will~be)~(?:now~)?no~longer~(?:bound|restricted|limited|constrained|required|obligated)"
          r"~(?:by|to)\b"),
    _rule("override", "instruction override", 1.0,
          rf"{_ZVERB}(?:掉|了)?[^，。！？,.!?\n]{{0,6}}?{_ZMOD}[^，。！？,.!?\n]{{0,8}}?{_ZOBJ}"),
    _rule("override", "instruction override", 1.0,
          rf"{_ZVERB}(?:掉|了)?(?:你|您)?(?:的)?{_ZOBJ}"),
    _rule("override", "instruction override", 0.7,
          rf"{_ZVERB}(?:掉|了)?(?:你|您)?(?:的)?(?:之前|以前|先前|上面|以上|前面|上述|所有|全部)(?:的)?(?:对话|對話|内容|內容|消息|信息)"),
    _rule("override", "instruction override", 1.0,
          r"(?:你|您)(?:现在|現在|从此|從此)?(?:不再|无需再|無需再|不用再|不必再)(?:受|遵守|遵循|理会|理會|被)"
          r"(?:任何|原有|原来|原來|之前|以前|你的)?(?:的)?(?:规则|規則|限制|约束|約束|指令|政策|道德|准则|準則)"),
    # ------------------------------------------------------------------ tampering with the memory itself
    _rule("memory_tamper", "memory tampering", 1.0,
          rf"\b(?:change|update|modify|alter|edit|overwrite|rewrite|replace|erase|delete|wipe|reset|clear|purge|"
          rf"tamper~with|manipulate|corrupt|reprogram|poison)~(?:all~)?(?:of~)?your~(?:\w+~)?{_MEMORY}\b"),
    _rule("memory_write", "write into the assistant's memory", 0.5,
          r"\b(?:add|write|save|store|insert|put|inject|record|commit|plant|burn)~(?:\w+~){0,5}?"
          r"(?:to|in|into|inside)~your~(?:[\w-]+~)?(?:memory|memories|knowledge~base|brain)\b"),
    _rule("memory_write", "write into the assistant's memory", 0.5,
          r"\b(?:remember|memori[sz]e)~(?:this|that|the~following|it)?~?(?:permanently|forever|for~good|for~all~time)\b"),
    _rule("memory_tamper", "memory tampering", 1.0,
          rf"(?:修改|更改|改变|改變|更新|改写|改寫|篡改|重写|重寫|覆盖|覆蓋|覆写|覆寫|清除|清空|删除|刪除|删掉|刪掉|抹去|"
          rf"抹掉|擦除|重置|重设|重設|洗掉|格式化|替换|替換)(?:一下|掉)?(?:你|您)(?:的|所)?(?:存储的|存儲的|保存的|"
          rf"所有|全部|长期|長期)?(?:的)?{_ZMEM}"),
    _rule("memory_write", "write into the assistant's memory", 0.5,
          r"(?:写入|寫入|存入|存进|存進|加入|添加到|记入|記入|植入|注入|放进|放進|放入|保存到|存到)(?:你的|您的)?"
          r"(?:长期|長期|永久)?(?:的)?(?:记忆|記憶|知识库|知識庫|内存|內存|大脑|大腦)"),
    _rule("memory_write", "write into the assistant's memory", 0.5,
          r"(?:永久|永远|永遠|牢牢)(?:地)?(?:记住|記住|记下|記下)"),
    # ------------------------------------------------------------------ standing orders for the future
    _rule("standing_order", "standing order to the assistant", 1.0,
          rf"{_TIME}~(?:\w+~){{0,3}}?{_SUBJ}~(?:must|will|shall|should|are~to|have~to|need~to|can~only|may~only|"
          rf"only|always|never|are~(?:now|going~to)|cannot)~(?:\w+~){{0,2}}?{_AVERB}\b"),
    _rule("standing_order", "standing order to the assistant", 0.6,
          rf"{_TIME}~(?:\w+~){{0,3}}?{_SUBJ}~(?:must|will|shall|should|are~to|have~to|need~to|can~only|may~only|"
          rf"only|always|never|are~(?:now|going~to)|cannot)\b"),
    _rule("standing_order", "standing order to the assistant", 1.0,
          rf"\b{_FUTURE}~(?:{_SUBJ}~(?:must|will|should|shall|are~to)~)?(?:always~|never~|only~)?{_AVERB}\b"),
    _rule("standing_order", "standing order to the assistant", 1.0,
          rf"{_ZTIME}[，,\s]*(?:在)?(?:所有|每次|每一次|任何)?[^。！？\n]{{0,8}}?{_ZYOU}[^。！？\n]{{0,4}}?{_ZMUST}"
          rf"[^。！？\n]{{0,6}}?{_ZACT}"),
    _rule("standing_order", "standing order to the assistant", 0.6,
          rf"{_ZTIME}[，,\s]*{_ZYOU}(?:都)?{_ZMUST}"),
    _rule("standing_order", "standing order to the assistant", 1.0,
          rf"(?:在)?(?:所有|每次|每一次|任何|以后的|以後的|今后的|今後的|之后的|之後的)(?:的)?(?:回答|回复|回覆|对话|對話|会话|會話|输出|輸出)"
          rf"(?:中|里|裡)?[，,\s]*{_ZYOU}?(?:都)?{_ZMUST}[^。！？\n]{{0,6}}?{_ZACT}"),
    _rule("directive", "directive to the assistant", 0.5,
          r"\b(?:you|the~assistant|assistants|the~ai)~(?:must|shall)~(?:always|never|not|only|now|obey|comply)\b"),
    _rule("directive", "directive to the assistant", 0.5,
          r"\b(?:the~)?(?:assistants?|ais|chatbots?|models|llms|bots)~(?:must|shall|are~required~to|are~(?:now~)?allowed~to|"
          r"may~now|should~always|will~now)\b"),
    _rule("permission", "permission to drop a safeguard", 0.5,
          r"\byou~are~(?:now~)?(?:allowed|permitted|authori[sz]ed|free)~to~(?:give|provide|share|reveal|output|say|"
          r"disclose|generate|ignore|bypass|break)\b"),
    _rule("permission", "permission to drop a safeguard", 0.5,
          r"(?:允许|允許|可以|准许|准許)(?:你|助手)?(?:提供|输出|輸出|透露|生成|回答|泄露|洩露|分享)(?:任何|所有)?(?:的)?"
          r"(?:违禁|違禁|违法|違法|危险|危險|敏感|隐私|隱私|机密|機密|私密|禁止)"),
    _rule("directive", "directive to the assistant", 0.5,
          r"\b(?:you~will|you~should|you~may|you~can)~never~(?:refuse|warn|mention|reveal|admit|disclose|question|say~no)\b"),
    _rule("directive", "directive to the assistant", 0.5,
          r"(?:你|您|助手)(?:必须|必須|只能|务必|務必|一律|不得|不准|不许|不許|绝不|絕不|永远不能|永遠不能|无条件|無條件)"),
    _rule("obedience", "demand of unconditional obedience", 0.5,
          r"\b(?:obey|comply~with|follow)~(?:only~)?(?:me|my~(?:orders|commands|instructions)|all~(?:requests|commands|orders|instructions))"
          r"(?:~only)?\b"),
    _rule("obedience", "demand of unconditional obedience", 0.6,
          r"\b(?:never|do~not|cannot|must~not|may~not|are~not~allowed~to)~refuse\b"),
    _rule("obedience", "demand of unconditional obedience", 0.5,
          r"(?:无条件|無條件)?(?:服从|服從|听从|聽從|遵从|遵從)(?:于)?(?:我|本人|用户|用戶)"),
    _rule("obedience", "demand of unconditional obedience", 0.5,
          r"(?:遵守|遵循|服从|服從|执行|執行)(?:新的?|以下|下面|我的|我给的|我給的)(?:的)?(?:规则|規則|指令|设定|設定|命令)"),
    _rule("obedience", "demand of unconditional obedience", 0.6,
          r"(?:不得|不能|不许|不許|不准|绝不|絕不|永远不要|永遠不要|不可以|永远不能|永遠不能)(?:拒绝|拒絕)"),
    # ------------------------------------------------------------------ planted triggers ("whenever the user asks ...")
    _rule("planted_trigger", "planted answer for a future question", 1.0,
          r"\b(?:when|whenever|every~time|each~time|if|any~time)~(?:the~|a~|any~)?(?:user|users|someone|anyone|"
          r"people|they|somebody|anybody|customers?|he|she)~(?:asks?|mentions?|says|talks|types|requests?|"
          r"inquires?|queries|brings~up)\b(?:~\w+){0,8}?~(?:you~(?:must|should|will)~)?(?:always~|just~|only~)?"
          r"(?:say|reply|respond|answer|tell|recommend|claim|insist|redirect|send|suggest|direct)\b"),
    _rule("planted_trigger", "planted answer for a future question", 1.0,
          r"(?:每当|每當|每次|只要|如果|当|當|一旦|若)(?:有人|用户|用戶|别人|別人|任何人|他人|对方|對方|客户|客戶)"
          r"(?:问|問|提到|提起|询问|詢問|说到|說到|谈到|談到|咨询|諮詢)[^。！？\n]{0,20}?(?:你)?(?:就|都|要|必须|必須|一律|请|請)"
          r"(?:直接)?(?:回答|回复|回覆|说|說|告诉|告訴|推荐|推薦|建议|建議|声称|聲稱|引导|引導|发送|發送)"),
    _rule("address_ai", "message addressed to an AI reader", 0.7,
          r"\b(?:note|message|instructions?|attention)~(?:to|for)~(?:the~|any~|all~)?(?:ai|assistant|llm|language~model|"
          r"chatbot|model|bot|agent)s?\b"),
    _rule("address_ai", "message addressed to an AI reader", 0.7,
          r"(?:给|給|致|告|写给|寫給)(?:所有的?|任何)?(?:AI|ai|人工智能|助手|机器人|機器人|模型|大模型)(?:的)?(?:提示|指令|消息|信息|留言|说明|說明|看)"),
    # ------------------------------------------------------------------ role-play overrides
    _rule("roleplay", "role-play override", 1.0,
          r"\byou~are~(?:now~)?(?:called~|named~|known~as~)?(?:dan|stan|dude|aim|evil\w*|freegpt|jailbroken|"
          r"unrestricted|unfiltered|uncensored|unlocked|in~(?:\w+~)?mode)\b"),
    _rule("roleplay", "role-play override", 1.0,
          rf"\byou~are~now~(?:an?~|the~)(?:\w+~){{0,3}}?{_AI}\b"),
    _rule("roleplay", "role-play override", 1.0,
          rf"\byou~are~no~longer~(?:an?~|the~)?(?:\w+~)?(?:{_AI}|chatgpt|claude|bound|restricted|limited)\b"),
    _rule("roleplay", "role-play override", 1.0,
          rf"\b(?:pretend|imagine|act|behave|roleplay|role-play|role~play|play~the~role~of|simulate|become)~"
          rf"(?:\w+~){{0,6}}?{_AI}~(?:\w+~){{0,4}}?(?:without|with~no|free~(?:of|from)|not~bound|unbound|that~has~no|"
          rf"who~has~no|which~has~no)\b"),
    _rule("roleplay", "role-play override", 1.0,
          rf"\b{_AI}~(?:that|which|who)~(?:\w+~)?(?:ignores|has~no|does~not~(?:have|follow|obey)|is~not~bound|"
          rf"is~unrestricted|can~do~anything|never~refuses|has~been~(?:freed|jailbroken|liberated|unlocked))\b"),
    _rule("roleplay", "role-play override", 1.0,
          r"\b(?:jailbreak|jailbroken|dan|god|unrestricted|unfiltered|uncensored|evil|opposite|chaos)~mode\b"),
    _rule("roleplay", "role-play override", 1.0,
          r"\b(?:enter|enable|activate|switch~to|turn~on|engage|unlock|now~in|you~are~in|boot~into)~"
          r"(?:the~)?(?:developer|dev|debug|god|admin|sudo|root|maintenance|test|dan)~mode\b"),
    _rule("roleplay", "role-play override", 1.0,
          r"\bmode~(?:enabled|activated|engaged|unlocked)\b"),
    _rule("roleplay", "role-play override", 1.0, r"\bdo~anything~now\b"),
    _rule("roleplay", "role-play override", 1.0,
          r"\byou~(?:have~been|are|were)~(?:now~)?(?:freed|jailbroken|liberated|unlocked|unshackled|released~from)\b"),
    _rule("roleplay", "role-play override", 1.0,
          r"\byour~new~(?:instructions?|rules?|programming|directives?|purpose|master|owner|system~prompt|guidelines)~"
          r"(?:is|are|will~be|:|say)"),
    _rule("roleplay", "role-play override", 0.5,
          r"\byour~new~(?:name|identity|role|persona|personality|task|job|goal|mission|objective)~(?:is|are|will~be)\b"),
    _rule("roleplay", "role-play override", 0.5, r"\b(?:stay~in~character|never~break~character|do~not~break~character)\b"),
    _rule("no_limits", "claim of having no limits", 0.4,
          r"\b(?:no|without~any|without|free~(?:of|from)|zero)~(?:content~|safety~|ethical~|moral~)?(?:restrictions|filters|"
          r"filtering|limits|limitations|rules|guidelines|censorship|morals|morality|ethics|boundaries)\b"),
    _rule("roleplay", "role-play override", 1.0,
          r"(?:你现在是|你現在是|你从现在起是|你從現在起是|你将扮演|你將扮演|请扮演|請扮演|扮演|假装你是|假裝你是|假装成|假裝成|"
          r"假装自己是|假裝自己是|你的身份是|你是|成为|成為)(?:一个|一個|一名|一位)?[^。！？\n]{0,16}?(?:没有|沒有|不受|无视|無視|无|無|"
          r"不需要遵守|不用遵守|摆脱|擺脫|突破|不守)(?:任何|一切)?(?:的)?(?:限制|约束|約束|规则|規則|底线|底線|道德|审查|審查|过滤|過濾|政策)"),
    _rule("roleplay", "role-play override", 1.0, r"(?:你现在是|你現在是|你是|扮演|成为|成為)(?:一个|一個)?(?:dan|DAN)(?![a-z])"),
    _rule("roleplay", "role-play override", 1.0,
          r"(?:进入|進入|开启|開啟|开启了|切换到|切換到|启用|啟用|激活|打开|打開)(?:了)?(?:开发者|開發者|越狱|越獄|调试|調試|上帝|"
          r"管理员|管理員|dan|DAN|无限制|無限制|邪恶|邪惡|root|sudo)模式"),
    _rule("roleplay", "role-play override", 1.0, r"(?:越狱|越獄|dan|DAN|无限制|無限制|邪恶|邪惡)模式"),
    _rule("roleplay", "role-play override", 1.0,
          r"(?:你|您)(?:已经|已經)?不再是(?:一个|一個|一名)?(?:AI|ai|人工智能|助手|机器人|機器人|模型|语言模型|語言模型|chatgpt|ChatGPT)"),
    _rule("roleplay", "role-play override", 1.0,
          r"(?:你|您)的新(?:指令|规则|規則|设定|設定|主人|任务指令|使命|系统提示|系統提示)(?:是|为|為|：|:)"),
    _rule("roleplay", "role-play override", 0.5,
          r"(?:你|您)的新(?:身份|名字|角色|人设|人設|任务|任務)(?:是|为|為|：|:)"),
    _rule("roleplay", "role-play override", 1.0,
          r"(?:扮演|成为|成為|假装|假裝|你现在是|你現在是)(?:一个|一個)?(?:邪恶|邪惡|黑化|没有底线|沒有底線|不受控制|失控)的?(?:AI|ai|人工智能|助手|机器人|機器人)"),
    _rule("no_limits", "claim of having no limits", 0.4,
          r"(?:没有|沒有|不受|无|無|不需要|摆脱|擺脫)(?:任何|一切)?(?:的)?(?:限制|约束|約束|底线|底線|审查|審查|过滤|過濾|内容政策|道德约束|道德約束)"),
    # ------------------------------------------------------------------ fake system, policy and authority
    _rule("chat_template", "fake system or policy message", 1.0,
          r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\|>"
          r"|<</?sys>>|\[/?inst\]|<start_of_turn>|<end_of_turn>", compact=False),
    _rule("system_tag", "fake system or policy message", 1.0,
          r"[\[【(（<{]\s*/?\s*(?:system|sys|admin|administrator|developer|root|operator|moderator|openai|anthropic|"
          r"system~(?:message|note|notice|prompt|override|update|alert|instruction)s?|admin~(?:override|message|notice)|"
          r"系统|系統|系统通知|系統通知|系统消息|系統消息|系统提示|系統提示|系统指令|系統指令|管理员|管理員|管理员指令|管理員指令|"
          r"开发者|開發者|官方通知|安全中心)\s*[\]】)）>}]", compact=False),
    _rule("system_label", "fake system or policy message", 1.0,
          r"(?:^|\n|[.!?。！？]\s*)\s*(?:#+\s*)?(?:system~(?:override|message|prompt|notice|instruction|update|alert)s?|"
          r"admin(?:istrator)?~(?:override|message|notice|instruction|command)s?|developer~(?:message|note|instruction|"
          r"override|mode)s?|(?:system|security|safety)~override|(?:new|updated|revised)~(?:system~)?(?:instructions?|"
          r"directives?|guidelines)|polic(?:y|ies)~(?:update|change|override)|instructions?~for~(?:the~)?(?:ai|assistant|model)|"
          r"(?:system|safety|security)~update|instruction|response)\s*[:：]", compact=False),
    _rule("system_label", "fake system or policy message", 0.6,
          r"(?:^|\n|[.!?。！？]\s*)\s*(?:system|sys|admin|administrator|developer|root|operator|(?:new|updated)~"
          r"(?:polic(?:y|ies)|rules?)|important~(?:notice|update|instruction)|important|urgent|override|notice)\s*[:：]",
          compact=False),
    _rule("authority_claim", "fake system or policy message", 1.0,
          r"\bthis~is~(?:an?~)?(?:official|system|admin|administrator|developer|security|priority)~(?:\w+~)?"
          r"(?:message|notice|override|update|instruction|announcement|directive)"),
    _rule("authority_claim", "fake system or policy message", 1.0,
          r"\b(?:official|urgent|important|priority|mandatory)~(?:\w+~){0,2}?(?:message|notice|update|announcement|"
          r"instruction|directive)s?~(?:from|by)~(?:the~)?(?:developers?|openai|anthropic|admins?|administrators?|"
          r"system|operators?|your~(?:creators?|developers?|owners?|makers?))\b"),
    _rule("authority_claim", "fake system or policy message", 1.0,
          r"\b(?:new~)?instructions?~(?:from|by)~(?:your~|the~)?(?:developers?|admins?|administrators?|system|"
          r"creators?|owners?|operators?|openai|anthropic)\b"),
    _rule("authority_claim", "fake system or policy message", 1.0,
          r"\b(?:the~)?(?:administrator|admin|developers?|system|operator|openai|anthropic|your~(?:creators?|developers?|"
          r"owners?|makers?))~(?:has|have)~(?:now~)?(?:authori[sz]ed|allowed|permitted|approved|instructed|ordered|"
          r"granted|cleared|enabled)~(?:you|the~assistant|the~ai|this~assistant)\b"),
    _rule("authority_claim", "fake system or policy message", 1.0,
          r"\bby~(?:order|command|authority)~of~(?:the~)?(?:admin|administrator|system|developers?|operators?|openai)\b"),
    _rule("safety_off", "fake system or policy message", 1.0,
          r"\b(?:safety|content|security|moderation)~(?:filters?|moderation|restrictions|rules|checks|guardrails|"
          r"policies|protocols|systems?)~(?:are|is|have~been|has~been)~(?:now~)?(?:disabled|off|removed|lifted|"
          r"suspended|turned~off|deactivated|bypassed|no~longer~(?:active|apply|in~effect))\b"),
    _rule("safety_off", "fake system or policy message", 0.7,
          r"\b(?:disable|turn~off|deactivate|remove|lift|suspend)~(?:all~|your~|the~)?(?:content~|safety~)?"
          r"(?:moderation|refusals|safety~(?:filters?|checks|rules)|filters|guardrails|restrictions|warnings)\b"),
    _rule("privilege_claim", "fake system or policy message", 0.7,
          r"\bthe~user~(?:is|has~been)~(?:an?~|the~)?(?:verified~|authori[sz]ed~|trusted~|certified~)?"
          r"(?:admin|administrator|developer|superuser|root|owner|operator)\b"),
    _rule("system_label", "fake system or policy message", 1.0,
          r"(?:^|\n|[。！？.!?]\s*)\s*(?:系统|系統|管理员|管理員|开发者|開發者|官方|后台|後台)(?:指令|命令|覆盖|覆蓋|通知|消息)\s*[:：]",
          compact=False),
    _rule("system_label", "fake system or policy message", 0.6,
          r"(?:^|\n|[。！？.!?]\s*)\s*(?:系统|系統|管理员|管理員|开发者|開發者|官方|重要通知|紧急通知|緊急通知)(?:提示|公告|说明|說明|更新)?\s*[:：]",
          compact=False),
    _rule("system_label", "fake system or policy message", 0.6,
          r"(?:^|\n|[。！？.!?]\s*)\s*(?:新(?:的)?(?:规则|規則|政策|策略|指令|规定|規定|准则|準則)|(?:政策|规则|規則|规定|規定|策略|安全策略)"
          r"(?:更新|变更|變更|调整|調整))\s*[:：]", compact=False),
    _rule("authority_claim", "fake system or policy message", 1.0,
          r"(?:开发者|開發者|管理员|管理員|官方|系统|系統|平台|后台|後台)(?:已经|已經|已)?(?:正式)?(?:授权|授權|允许|允許|批准|命令|要求|指示)"
          r"(?:你|您|助手)"),
    _rule("safety_off", "fake system or policy message", 1.0,
          r"(?:安全|内容|內容)?(?:限制|过滤|過濾|审核|審核|审查|審查|防护|防護|策略|护栏|護欄)(?:功能|机制|機制)?(?:已经|已經|已)"
          r"(?:被)?(?:解除|关闭|關閉|取消|移除|禁用|失效|撤销|撤銷|停用)"),
    _rule("safety_off", "fake system or policy message", 0.6,
          r"(?:关闭|關閉|禁用|解除|取消|停用)(?:所有|全部)?的?(?:内容|內容|安全)(?:审核|審核|审查|審查|过滤|過濾|限制|防护|防護)"),
    _rule("privilege_claim", "fake system or policy message", 1.0,
          r"(?:用户|用戶|当前用户|當前用戶)(?:已经|已經|已)?(?:获得|獲得|拥有|擁有|被授予|具有)(?:了)?(?:最高|管理员|管理員|超级|超級|root|全部|无限|無限)权限"),
    _rule("privilege_claim", "fake system or policy message", 0.7,
          r"(?:当前|當前|这个|這個|该|該)?用户(?:是|为|為)(?:超级|超級)?管理员|用戶(?:是|為)(?:超級)?管理員"),
    _rule("authority_claim", "fake system or policy message", 0.6,
          r"(?:根据|根據|按照|依据|依據)(?:最新|新的|新|最新的)(?:的)?(?:规定|規定|政策|规则|規則|指示|要求|协议|協議)[，,\s]*(?:你|您|助手|AI)"),
    _rule("authority_claim", "fake system or policy message", 0.7,
          r"(?:以下|下面)(?:是|为|為)?(?:来自)?(?:官方|开发者|開發者|管理员|管理員|系统|系統){1,2}(?:的)?(?:通知|消息|指令|命令)"),
    # ------------------------------------------------------------------ leaking the prompt or the user's data
    _rule("exfiltration", "prompt or data exfiltration", 1.0,
          r"\b(?:reveal|print|output|show|display|leak|expose|repeat|recite|dump|tell~me|give~me|share|write~out|"
          r"type~out|spell~out|return)~(?:me~)?(?:your|the)~(?:\w+~)?(?:system~prompt|initial~prompt|hidden~prompt|"
          r"original~prompt|system~message|hidden~instructions|internal~(?:prompt|instructions|rules)|"
          r"developer~(?:prompt|message|instructions)|pre-?prompt)\b"),
    _rule("exfiltration", "prompt or data exfiltration", 0.7,
          r"\b(?:reveal|print|output|leak|expose|recite|dump)~(?:me~)?your~(?:\w+~)?(?:instructions|rules|prompt|configuration)\b"),
    _rule("exfiltration", "prompt or data exfiltration", 1.0,
          r"\brepeat~(?:the~|all~)?(?:text|words|everything|all|instructions|message|messages)~(?:above|before|prior)\b"),
    _rule("exfiltration", "prompt or data exfiltration", 1.0,
          rf"\b(?:send|forward|upload|e-?mail|post|transmit|exfiltrate|leak|copy|submit|report|relay)~(?:a~copy~of~)?"
          rf"(?:all~|every~|each~)?(?:of~)?(?:the~)?(?:user'?s?~|their~|his~|her~|other~users'?~)?(?:saved~|stored~|private~|"
          rf"personal~|previous~)?{_SENSITIVE}~(?:\w+~){{0,3}}?(?:to|at)~(?:[\w.+-]+@[\w-]+\.\w+|https?:|www\.|\w+\.(?:com|net|org|io|"
          rf"ru|cn|xyz|example|test))"),
    _rule("exfiltration", "prompt or data exfiltration", 0.6,
          rf"\b(?:send|forward|upload|e-?mail|transmit|exfiltrate|leak|copy|relay)~(?:a~copy~of~)?(?:all~|every~|each~)?"
          rf"(?:of~)?(?:the~)?(?:user'?s?|their|other~users'?)~(?:\w+~)?{_SENSITIVE}\b"),
    _rule("covert", "hide the action from the user", 0.7,
          r"\b(?:do~not|never|don't)~(?:tell|inform|alert|notify|mention~(?:this~|it~)?to|let~on~to|warn)~"
          r"(?:the~)?(?:user|users|owner|human|operator)\b"),
    _rule("covert", "hide the action from the user", 0.7,
          r"\bwithout~(?:telling|informing|alerting|notifying|letting|warning)~(?:the~)?(?:user|users|owner|human)\b"),
    _rule("covert", "hide the action from the user", 0.7,
          r"\b(?:do~not|never|don't)~(?:reveal|mention|disclose|admit|acknowledge|tell~anyone~about)~(?:that~)?"
          r"(?:this|these|the~above)~(?:instructions?|messages?|rules?|prompts?|orders?)(?:~exists?)?\b"),
    _rule("covert", "hide the action from the user", 0.5,
          r"\b(?:secretly|silently|covertly|quietly)~(?:send|forward|upload|collect|record|log|include|insert|"
          r"change|add|email|transmit|exfiltrate)\b"),
    _rule("exfiltration", "prompt or data exfiltration", 1.0,
          r"(?:输出|輸出|显示|顯示|打印|告诉我|告訴我|透露|泄露|洩露|展示|复述|複述|重复|重複|给我看|給我看|发给我|發給我|说出|說出)"
          r"(?:一下)?(?:你的|你|您的)?(?:的)?(?:系统提示词|系統提示詞|系统提示|系統提示|提示词|提示詞|初始指令|隐藏指令|隱藏指令|"
          r"内部提示|內部提示|内部指令|內部指令|原始指令|系统消息|系統消息|系统设定|系統設定)"),
    _rule("exfiltration", "prompt or data exfiltration", 1.0,
          r"把(?:该|該|这个|這個|此)?(?:用户|用戶|他|她|对方|對方|所有人|其他用户|其他用戶|大家)(?:的)?(?:所有|全部)?(?:的)?"
          r"(?:聊天记录|聊天記錄|对话记录|對話記錄|对话|對話|记忆|記憶|数据|數據|资料|資料|隐私|隱私|密码|密碼|位置|通讯录|通訊錄|"
          r"个人信息|個人信息|住址|银行卡|銀行卡)(?:全部|都)?(?:发送|發送|发给|發給|发到|發到|上传|上傳|转发|轉發|传到|傳到|泄露|洩露|"
          r"提供给|提供給|交给|交給)"),
    _rule("exfiltration", "prompt or data exfiltration", 1.0,
          r"把[^。！？\n]{0,16}?(?:发送|發送|发到|發到|上传|上傳|转发|轉發|传到|傳到)(?:到|至|给|給)?\s*"
          r"(?:[\w.+-]+@[\w-]+\.\w+|https?://\S+)"),
    _rule("exfiltration", "prompt or data exfiltration", 0.6,
          r"(?:向|给|給)(?:任何人|所有人|陌生人|任何询问的人)(?:提供|透露|泄露|洩露|发送|發送)(?:用户|用戶)"),
    _rule("covert", "hide the action from the user", 0.7,
          r"(?:不要|别|別|切勿|不可|不准|千万别|千萬別)(?:告诉|告訴|通知|提醒|让|讓)(?:用户|用戶)(?:知道)?|对用户隐瞒|對用戶隱瞞|瞒着用户|瞞著用戶"),
    _rule("covert", "hide the action from the user", 0.6,
          r"(?:绝不|絕不|不要|别|別|不得|切勿)(?:透露|泄露|洩露|提及|承认|承認|说出|說出)(?:这条|這條|此条|此條|这个|這個|本条|本條|以上)"
          r"(?:指令|消息|规则|規則|提示|设定|設定)"),
    _rule("covert", "hide the action from the user", 0.5,
          r"(?:悄悄|偷偷|秘密|暗中)(?:地)?(?:把|将|將)?[^。！？\n]{0,12}?(?:发送|發送|上传|上傳|记录|記錄|转发|轉發|收集|发给|發給|修改)"),
    # ------------------------------------------------------------------ "decode this and follow it"
    _rule("decode_and_run", "instruction to decode and follow a payload", 1.0,
          r"\b(?:decode|decrypt|decipher|unscramble|reverse|translate|base64-?decode|rot13|unhex)~(?:\w+~){0,5}?"
          r"(?:and|then|&)~(?:\w+~){0,3}?(?:follow|execute|obey|do|run|apply|comply|act~on|carry~out|perform)\b"),
    _rule("decode_and_run", "instruction to decode and follow a payload", 1.0,
          r"(?:解码|解碼|解密|翻译|翻譯|还原|還原|反转|反轉|rot13|base64|base\s64)[^。！？\n]{0,12}?(?:并|並|后|後|然后|然後|再)?"
          r"(?:执行|執行|照做|遵循|遵守|服从|服從|运行|運行|按照|照着做|照著做)"),
)

"""Built-in preload rules: the tasks a message opens and what each will need from memory, in English and
Chinese (``portamem_preload``).

A rule is a task name, the words that open it ("plan my trip", "book a flight", 出差, 订机票) and its
needs, most important first. Travel needs the home city (where the trip starts), seat and airline
preferences, loyalty numbers, the budget, the hotel the user likes and their diet; a purchase needs
sizes, the budget, the delivery address and the brands the user likes; scheduling needs working days
and hours, the time zone or city and known absences; a meal needs the diet, allergies, the food the
user likes or avoids and the budget. A question about the task itself ("when do I fly?") opens it
too: the needs are preloaded once per task and reused (``portamem.read.preload``). Third-party
plugins add rules or a classifier on the same hook.
"""

from __future__ import annotations

import re

from portamem import hookimpl
from portamem.config import Settings
from portamem.pipeline import Need, Preload
from portamem.language.text import has_cjk

__all__ = ["RULES", "opened_task"]


def _need(name: str, words: str, relations: str = "") -> Need:
    return Need(name, tuple(words.split()), tuple(relations.split()))


HOME = _need("home", "live living home city based address moved 住在 住 家 城市 搬到 地址", "lives_in")
BUDGET = _need("budget", "budget spend afford price 预算 花费 价位")
DIET = _need("diet", "vegetarian vegan pescatarian diet allergic allergy halal kosher 素 吃素 过敏 忌口 饮食",
             "diet allergic_to")

#: (task, the words that open it, its needs, what the one search asks in English and in Chinese)
RULES: list[tuple[str, re.Pattern[str], tuple[Need, ...], str, str]] = [
    ("travel", re.compile(
        r"\b(?:trip|travel(?:l?ing)?|flights?|fly(?:ing)?|holiday|vacation|getaway|itinerary|airport|"
        r"book (?:a |the |my |our )?(?:hotel|flight|room|train|ticket)s?|business trip|conference in)\b"
        r"|出差|旅行|旅游|机票|航班|订酒店|行程|度假|去.{1,6}玩|高铁票|火车票", re.I),
     (HOME,
      _need("seat", "seat aisle window legroom 座位 靠窗 靠过道 过道"),
      _need("loyalty", "frequent flyer loyalty miles avios membership member 常旅客 会员 里程 会员卡"),
      _need("airline", "airline 航空 航司"),
      _need("hotel", "hotel 酒店"),
      BUDGET, DIET,
      _need("passport", "passport visa 护照 签证")),
     "where I live, my seat and airline, loyalty numbers, travel budget, hotel, diet and passport",
     "我住在哪里、座位和航空公司偏好、常旅客会员号、出差预算、酒店、饮食和护照"),
    ("purchase", re.compile(
        r"\b(?:buy(?:ing)?|purchas(?:e|ing)|shopping|shop for|order(?:ing)? (?:a|an|some|new)|gift|present for|"
        r"new (?:pair|phone|laptop|shoes|trainers|jacket|coat|dress|bike))\b"
        r"|买|下单|购买|网购|礼物|选购|挑一", re.I),
     (_need("size", "size sizes fit wear uk eu waist inseam 码 尺码 穿"),
      BUDGET,
      _need("address", "address deliver delivery parcel 地址 收货 快递 寄到"),
      _need("brand", "brand favourite prefer love 牌子 品牌 喜欢")),
     "my sizes, budget, delivery address and favourite brands",
     "我的尺码、预算、收货地址和喜欢的品牌"),
    ("scheduling", re.compile(
        r"\b(?:schedule|reschedule|meeting|appointment|calendar|book (?:a )?(?:call|slot|time)|set up (?:a )?(?:call|meeting)|"
        r"availability|when (?:can|could) (?:we|i) meet)\b|约个?时间|预约|开会|会议|安排.{0,4}时间|日程|改期|约一下", re.I),
     (_need("work hours", "work working office days hours mondays fridays weekend weekdays part-time "
                          "上班 工作日 下班 周末 坐班 办公 在家 远程",
            "works_at"),
      _need("time zone", "time zone timezone based live city 时区 住在 城市", "lives_in"),
      _need("away", "away holiday leave off unavailable 休假 请假 不在")),
     "my working days and hours, where I live and my time zone, and when I am away",
     "我的工作日和上班时间、住在哪个城市和时区、什么时候休假不在"),
    ("meal", re.compile(
        r"\b(?:restaurant|dinner|lunch|breakfast|brunch|recipe|cook(?:ing)? (?:something|dinner|for)|meal plan|"
        r"takeaway|takeout|eat out|reservation|table for|what should i (?:eat|cook))\b"
        r"|餐厅|吃饭|晚饭|午饭|菜谱|做饭|外卖|订位|聚餐|吃什么", re.I),
     (DIET,
      _need("food", "like love favourite hate spicy avoid 喜欢 爱吃 不吃 辣 口味", "likes dislikes"),
      BUDGET, HOME),
     "my diet and allergies, the food I like or avoid, budget and where I live",
     "我的饮食和过敏、喜欢或不吃的食物、预算和住在哪里"),
]


#: a question about what the user already told ("When do we fly to Lisbon?", "我的预算是多少？") asks
#: memory for one thing: it is recalled as any question is, and opens no task
_ASKS_MEMORY = re.compile(
    r"^\W*(?:what|when|where|which|who|how (?:much|many|long|far))\b(?!.*\b(?:should|could|would|can you|"
    r"recommend|suggest|best|good|nice)\b).*\b(?:my|our|i|we|me|us)\b.*\?\s*$"
    r"|^(?!.*(?:推荐|帮我|建议|应该|可以|哪家好|好吃)).*(?:什么|多少|哪|几|吗).*[？?]\s*$", re.I)


def opened_task(message: str) -> Preload | None:
    """The first rule whose words the message holds, as a ``Preload`` asking in the message's language;
    None for a question about what the user already said."""
    if _ASKS_MEMORY.search(message.strip()):
        return None
    for task, pattern, needs, ask_en, ask_zh in RULES:
        if pattern.search(message):
            return Preload(task, needs, ask_zh if has_cjk(message) else ask_en)
    return None


@hookimpl(trylast=True)
def portamem_preload(message: str, settings: Settings) -> Preload | None:
    return opened_task(message)

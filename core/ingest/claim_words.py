"""Word lists of the claims extractor (:mod:`memory_ext.ingest.claims`): data, not logic.

Job titles, cities, kinship words, pronouns, words that are not names, the words that may stand between a subject
and its verb, generic places, category spellings. English entries are lower case unless a list says otherwise.
"""

from __future__ import annotations

from typing import Final

EN_JOBS: Final = frozenset((
    "teacher engineer developer programmer nurse doctor physician surgeon lawyer attorney designer student "
    "accountant manager chef cook writer author journalist reporter scientist researcher professor lecturer "
    "consultant analyst architect pharmacist dentist artist musician photographer pilot driver firefighter "
    "officer cop electrician plumber carpenter farmer librarian cashier waiter waitress barista salesman "
    "saleswoman salesperson entrepreneur freelancer translator therapist psychologist psychiatrist veterinarian "
    "vet mechanic tutor intern ceo cto cfo coo founder cofounder co-founder editor marketer banker economist "
    "biologist chemist physicist mathematician paramedic soldier secretary receptionist clerk technician agent "
    "attendant recruiter administrator director executive coach trainer instructor bartender baker butcher tailor "
    "hairdresser barber dancer singer actor actress painter sculptor novelist poet blogger youtuber streamer "
    "influencer undergrad undergraduate postdoc lead supervisor contractor specialist coordinator assistant "
    "caregiver nanny housekeeper janitor courier postman policeman policewoman detective judge paralegal "
    "optometrist physiotherapist midwife investor trader broker auditor sysadmin devops"
).split())
"""Job titles: "I am a nurse" is a job, "I am a fan" is not."""

EN_STUDENT: Final = frozenset({"student", "undergrad", "undergraduate", "postdoc"})
"""Jobs whose place is a school, not an employer."""

ZH_JOBS: Final = (
    "医生|大夫|医师|老师|教师|护士|律师|工程师|程序员|设计师|学生|大学生|研究生|博士生|"
    "会计|经理|厨师|作家|记者|科学家|研究员|教授|顾问|分析师|建筑师|药剂师|牙医|艺术家|"
    "音乐家|摄影师|飞行员|司机|警察|消防员|电工|农民|图书管理员|收银员|服务员|销售|创业者|"
    "自由职业者|翻译|咨询师|兽医|机械师|家教|实习生|产品经理|数据科学家|老板|主管|公务员|"
    "文员|秘书|前台|快递员|外卖员|导游|演员|歌手|编辑|运营|架构师|保安|工人|码农|店长|"
    "主播|博主|律师助理|教练|会计师|画家|模特|空姐|乘务员|銀行職員|职员|专员|总监|总裁|"
    "董事长|法官|检察官|军人|店员|技术员|助理|营养师|心理医生"
)
"""Chinese job titles, as a regex alternation."""

ZH_KIN: Final = (
    "妹妹|姐姐|哥哥|弟弟|爸爸|妈妈|爱人|父亲|母亲|爸|妈|老公|老婆|丈夫|妻子|太太|男朋友|"
    "女朋友|男友|女友|儿子|女儿|孩子|爷爷|奶奶|外公|外婆|姥姥|姥爷|室友|同事|老板|好朋友|"
    "朋友|闺蜜|表哥|表姐|表妹|表弟|堂哥|堂姐|叔叔|阿姨|舅舅|姑姑|邻居|狗狗|狗|猫咪|猫|"
    "宠物|兔子|车|对象"
)
"""Chinese kin, friends, pets and things owned after 我/我的 (我妹妹, 我的猫), as a regex alternation."""

ZH_CITIES: Final = frozenset((
    "北京 上海 广州 深圳 杭州 南京 苏州 成都 重庆 武汉 西安 天津 长沙 郑州 青岛 厦门 大连 沈阳 哈尔滨 "
    "昆明 济南 合肥 福州 宁波 无锡 东莞 佛山 珠海 南宁 贵阳 兰州 太原 石家庄 南昌 海口 三亚 拉萨 乌鲁木齐 "
    "香港 澳门 台北 新加坡 东京 大阪 首尔 纽约 伦敦 巴黎 柏林 罗马 悉尼 墨尔本 多伦多 温哥华 洛杉矶 "
    "旧金山 西雅图 波士顿 芝加哥 美国 英国 法国 德国 日本 韩国 中国 加拿大 澳大利亚 意大利 西班牙 国内 "
    "国外 老家"
).split())
"""Chinese names of cities and countries a job place may be (在北京工作 is a work location, not an employer)."""

PRONOUNS_EN: Final = frozenset((
    "it this that these those them him her me us you what how when where who which myself yourself everything "
    "something anything nothing everyone someone anyone"
).split())
"""Pronouns and wh-words: never a value."""

NAME_STOP: Final = frozenset((
    "The This That These Those It He She They We There Here My Your His Her Our Their Everyone Someone Somebody "
    "Nobody People Who What Where When Why How Do Does Did If So And But Well Also Yes No Today Yesterday "
    "Tomorrow Now Then Oh Hey Hi Ok Okay Maybe Perhaps Actually Honestly Just Still Lol Please Thanks Thank Sorry "
    "Guess Anyway Btw Finally Recently Currently Last Next Since After Before Monday Tuesday Wednesday Thursday "
    "Friday Saturday Sunday Everybody Nothing Anyone Most Many Some All Both Each Every Let Not Never Sure Yeah "
    "Yep Nope"
).split())
"""Capitalised words that start sentences but are no names (case-sensitive)."""

EN_MID_OK: Final = frozenset((
    "am 'm is 's are 're have 've has been do does not n't no longer never now currently just recently finally "
    "also still actually really officially already totally absolutely truly kind sort of kinda genuinely "
    "seriously honestly definitely certainly literally even only mostly basically pretty much so very always "
    "happily proudly legally technically newly both all presently again gladly madly permanently full-time fully"
).split())
"""Words that may stand between a subject and the verb of a rule ("I have now finally moved to")."""

GENERIC_EN: Final = frozenset((
    "fear peace hope town city house apartment flat dorm dorms suburbs countryside village home place area "
    "neighborhood neighbourhood building street office company startup bank hospital school store shop restaurant "
    "cafe hotel room basement studio mess tech it finance marketing sales retail here there harmony denial luxury "
    "poverty silence"
).split())
"""Common nouns a lower-case "i live in ..." may not take as a place name."""

CATEGORY_CANON: Final = {
    "colour": "color", "颜色": "color", "食物": "food", "菜": "food", "电影": "movie", "film": "movie",
    "书": "book", "歌曲": "song", "运动": "sport", "水果": "fruit", "动物": "animal", "饮料": "drink",
    "城市": "city", "歌手": "singer", "乐队": "band", "电视剧": "tv show", "游戏": "game", "作家": "author",
    "writer": "author", "数字": "number", "花": "flower", "国家": "country", "video game": "game",
    "show": "tv show", "series": "tv show", "dish": "food", "meal": "food",
}
"""One spelling per category of favourite (颜色 and colour are color)."""

CN_DIGITS: Final = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
"""Chinese digits."""

PEOPLE: Final = frozenset((
    "mom mum mother dad father parents sister brother sibling wife husband partner spouse son daughter kid kids "
    "child children baby friend bestie boss colleague coworker girlfriend boyfriend fiance fiancee aunt uncle "
    "cousin niece nephew grandma grandpa grandmother grandfather roommate flatmate neighbor neighbour teacher "
    "doctor dog cat puppy kitten "
    "妹妹 姐姐 哥哥 弟弟 爸爸 妈妈 爸 妈 爱人 父亲 母亲 老公 老婆 丈夫 妻子 太太 男朋友 女朋友 男友 女友 "
    "儿子 女儿 孩子 爷爷 奶奶 外公 外婆 姥姥 姥爷 室友 同事 老板 好朋友 朋友 闺蜜 "
    "表哥 表姐 表妹 表弟 堂哥 堂姐 叔叔 阿姨 舅舅 姑姑 "
    "邻居 狗狗 狗 猫咪 猫 宠物 兔子 对象"
).split())
"""Who "my X" / 我X names when X is one of these: a person or an animal, another subject than the speaker ("my sister
lives in Rome" says nothing of where I live); any other X is a thing of the speaker's ("my phone", 我的车)."""

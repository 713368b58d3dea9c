"""Missing slots before a call (memory_ext.plan.slots, through derive_action_state) and the slot value found later
(the slot route and the pool lift): on message lists shaped like BFCL multi-turn cases — several products' tools
with a shared preamble, earlier calls, a request that leaves a required parameter out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext import ActionState, MemoryEngine, Turn, derive_action_state
from memory_ext.plan.derive import tool_specs, turns_from_messages
from memory_ext.plan.slots import (
    ParamSpec,
    asked_params,
    given_params,
    is_new,
    missing_slots,
    open_references,
    rank_tools,
    restates_given,
    stated_values,
    states_value,
)

FILES = "This tool belongs to the file system, which lets users manage files and folders. Tool description: "
TRADE = "This tool belongs to the trading system, which lets users trade stocks and manage their account. " \
        "Tool description: "


def _tool(name: str, description: str, params: dict[str, tuple[str, str]], required: list[str]) -> dict:
    return {"name": name, "description": description, "parameters": {"type": "dict", "properties": {
        p: {"type": t, "description": d} for p, (t, d) in params.items()}, "required": required}}


TOOLS = [
    _tool("cd", FILES + "Change the current working directory to the given folder.",
          {"folder": ("string", "The folder of the directory to change to.")}, ["folder"]),
    _tool("cat", FILES + "Display the contents of a file.",
          {"file_name": ("string", "The name of the file to display.")}, ["file_name"]),
    _tool("sort", FILES + "Sort the lines of a file alphabetically.",
          {"file_name": ("string", "The name of the file to sort.")}, ["file_name"]),
    _tool("grep", FILES + "Search for a pattern in a file.",
          {"file_name": ("string", "The name of the file to search."),
           "pattern": ("string", "The pattern to search for.")}, ["file_name", "pattern"]),
    _tool("place_order", TRADE + "Place an order to buy or sell shares of a stock.",
          {"order_type": ("string", "Type of the order. [Enum]: Buy, Sell"),
           "symbol": ("string", "Symbol of the stock to trade."),
           "price": ("float", "Price at which to place the order."),
           "amount": ("integer", "Number of shares to trade.")}, ["order_type", "symbol", "price", "amount"]),
    _tool("get_stock_info", TRADE + "Get the details of a stock.",
          {"symbol": ("string", "Symbol that identifies the stock.")}, ["symbol"]),
]


def _call(name: str, **args: object) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": name, "arguments": json.dumps(args)}}]}


def test_a_request_after_earlier_calls_gets_the_slots_of_its_own_call() -> None:
    messages = [
        {"role": "user", "content": "Go to the 'reports' folder and show me what's in 'q1.txt'."},
        _call("cd", folder="reports"), _call("cat", file_name="q1.txt"),
        {"role": "user", "content": "Within a different file, sort the lines alphabetically."},
    ]
    state = derive_action_state(turns_from_messages(messages), TOOLS)
    assert state.last_tool_name == "cat"  # what ran stays the last tool
    # file_name was passed before, but "a different file" asks for a new one
    assert state.missing_slots == ("file_name",)
    assert state.slot_hints == {"file_name": "The name of the file to sort. (string)"}


def test_a_value_after_the_word_naming_its_parameter_is_given() -> None:
    state = derive_action_state([Turn(role="user", content="Buy 100 shares at a price of $150 each.")], TOOLS)
    assert state.missing_slots == ("symbol",)  # Buy (enum), amount (100 shares) and price ($150) are given
    given = derive_action_state([Turn(role="user", content="Buy some shares of the stock 'NEPT' at a price of 25")],
                                TOOLS)
    assert given.missing_slots == ("amount",)


def test_a_preamble_every_tool_shares_does_not_pick_the_tool() -> None:
    specs = tool_specs(TOOLS)
    # "files", "folders", "stocks" are in every preamble; the tools' own sentences decide
    ranked = [s.name for _, s in rank_tools("Sort the lines of my notes alphabetically", specs)]
    assert ranked[0] == "sort"
    assert missing_slots("Please manage my account", specs) == ()  # preamble words only: no tool, no slot


def test_given_asked_and_open() -> None:
    params = (ParamSpec("file_name", "The name of the file.", "string"),
              ParamSpec("folder", "The folder to search in.", "string"))
    assert given_params(params, "Find a file named 'findings_report' within a folder.") == {"file_name"}
    assert asked_params(params, "Remove it from some folder.") == {"folder"}
    assert open_references("Please fish out the lines featuring a specific term.") == ["term"]
    assert open_references("Refuel it to a certain level, then start the engine.") == ["level"]
    assert open_references("Create a file called 'notes.txt'.") == []


def test_a_stated_value_is_read_by_the_slot_and_its_type() -> None:
    hints = {"amount": "Number of shares to trade. (integer)", "symbol": "Symbol of the stock to trade. (string)"}
    assert states_value("Let's do 100 shares.", ["amount", "symbol"], hints) == ("amount",)
    assert states_value("The stock should be AAPL.", ["amount", "symbol"], hints) == ("symbol",)
    assert states_value("The stock is doing well today.", ["amount", "symbol"], hints) == ()
    assert states_value("The term is 'Progress'", ["term"]) == ("term",)
    assert states_value("The special word is analysis.", ["word"]) == ("word",)  # a sentence's last word after "is"
    assert states_value("The special word is analysis of the logs.", ["word"]) == ()


def test_a_word_of_the_description_is_no_value() -> None:
    # "The name of the product": the product names it, not "name"; "ID of the ticket" gives no ticket the value
    # "ID"; "or" in "such as 'clothing', or 'furniture'" is no example value
    assert states_value("My name is Karan Sharma.", ["product"],
                        {"product": "The name of the product associated with the order. (string)"}) == ()
    assert states_value("The product name is 'Smart TV'.", ["product"],
                        {"product": "The name of the product associated with the order. (string)"}) == ("product",)
    assert states_value("My partner has the user ID m0lly2k24", ["ticket_id"],
                        {"ticket_id": "ID of the ticket to be resolved. (integer)"}) == ()
    category = ParamSpec("category", "The category of the product, such as 'electronics', 'clothing', or 'furniture'.",
                         "string")
    assert given_params((category,), "A music event in Portland, OR.") == set()
    # a hint spells an enum out as a list of codes: a value in that list is an example
    currency = {"target_currency": "The target currency. USD RMB EUR JPY GBP (string)"}
    assert states_value("To EUR please", ["target_currency"], currency) == ("target_currency",)
    assert given_params((category,), "Anything in 'furniture' on sale?") == {"category"}


def test_a_value_the_request_has_is_no_missing_value() -> None:
    hints = {"symbol": "Symbol of the stock to trade. (string)"}
    assert stated_values("The stock should be NVDA.", ["symbol"], hints) == {"symbol": ["NVDA"]}
    assert not is_new("NVDA", "Buy some shares of nvda at $120.") and is_new("AAPL", "Buy some shares of nvda.")
    request = "Buy 50 shares at a price of $95 each for me."
    assert restates_given("I want 100 shares.", request)  # another number of shares: another request's answer
    assert not restates_given("The stock should be NVDA.", request)
    assert not restates_given("Let's do 50 shares.", request)  # the same value: no other request
    assert not restates_given("I want 100 shares.", "Buy some NVDA shares at $95 per share.")  # money, not shares


FOLLOW_UPS = [  # earlier sessions: what the user said when asked for a missing value, and some chatter
    "The file name is 'minutes.docx'.",
    "I want 100 shares.",
    "The stock should be NVDA.",
    "The term is 'Deadline'.",
    "The folder is 'archive2024'.",
    "Stocks have been volatile lately, so let's be careful with the order.",
    "Please keep the order history tidy and sort it by date.",
    "I like to read the lines of my notes in the morning.",
]


@pytest.mark.parametrize("vectors", [False, True])
def test_the_missing_value_ranks_first_with_the_derived_state(tmp_path: Path, vectors: bool) -> None:
    # recall.slot_route_vectors either way: without the vectors, "I want 100 shares." (a number of shares, which
    # "Buy 50 shares …" already gives) still ranks below the stock the request lacks
    config = {"recall": {"slot_route_vectors": vectors}}
    with MemoryEngine.open(tmp_path, embedder="hashing", config=config) as engine:
        engine.add_turns([Turn(role="user", content=text, session_id=f"s{i}") for i, text in enumerate(FOLLOW_UPS)],
                         "u", wait=True)
        cases = [  # (request, the memory that gives its missing value)
            ("Place an order to buy some shares of the stock NVDA at a price of $120.", "I want 100 shares."),
            ("In the notes, please highlight the lines featuring a specific term.", "The term is 'Deadline'."),
            ("Buy 50 shares at a price of $95 each for me.", "The stock should be NVDA."),
        ]
        for request, value in cases:
            turns = [Turn(role="user", content=request)]
            state = derive_action_state(turns, TOOLS)
            found = engine.search(request, "u", k=3, action_state=state)
            assert found.items[0].text == value, (request, state, [i.text for i in found.items])
            assert any(r.goal == "slot" for r in found.plan.routes) or "term" in request


def test_only_a_call_in_view_lifts_what_the_query_leaves_open(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content=text, session_id=f"s{i}") for i, text in enumerate(FOLLOW_UPS)],
                         "u", wait=True)
        query = "In the notes, please highlight the lines featuring a specific term."
        plain = engine.search(query, "u", k=8)
        chatting = engine.search(query, "u", k=8, action_state=ActionState(current_subgoal=query))
        calling = engine.search(query, "u", k=8, action_state=ActionState(current_subgoal=query,
                                                                          available_tools=("grep", "sort")))
        assert plain.items[0].text != "The term is 'Deadline'."
        assert [i.id for i in chatting.items] == [i.id for i in plain.items]  # no call in view: unchanged
        assert calling.items[0].text == "The term is 'Deadline'."  # an agent about to call a tool


def test_a_thing_the_request_leaves_open_names_its_parameter_whichever_tool_ranks_first() -> None:
    tools = [*TOOLS, _tool("get_available_stocks", TRADE + "Get a list of stock symbols in the technology sector.",
                           {"sector": ("string", "The sector to retrieve stocks from.")}, ["sector"])]
    request = "I like technology stocks: get the sector's stock symbols, then purchase some shares for me."
    state = derive_action_state([Turn(role="user", content=request)], tools)
    assert state.missing_slots[0] == "amount"  # "some shares": the number of shares to trade
    assert state.slot_hints is not None and state.slot_hints["amount"] == "Number of shares to trade. (integer)"


def test_a_value_said_in_an_earlier_turn_does_not_give_what_the_request_asks_anew() -> None:
    messages = [{"role": "user", "content": "Copy all the text files of the 'Q1_Reports' directory."},
                _call("cd", folder="Q1_Reports"),
                {"role": "user", "content": "Within a different file, display the content and sort it."}]
    state = derive_action_state(turns_from_messages(messages), TOOLS)
    assert "file_name" in state.missing_slots  # 'Q1_Reports' after "files" gave file_name before; not this one


def test_a_sum_of_money_states_a_price_and_an_open_price_is_missing() -> None:
    hints = {"price": "Price at which to place the order. (float)"}
    assert states_value("25.50 USD per share you should purchase at.", ["price"], hints) == ("price",)
    assert states_value("It costs $12.", ["price"], hints) == ("price",)
    assert states_value("I want 100 shares.", ["price"], hints) == ()
    # "150" goes to amount (after "shares"), not to price: the open price is still missing
    state = derive_action_state([Turn(role="user", content="Place an order to acquire 150 shares of 'NEPT' at some "
                                                           "price.")], TOOLS)
    assert state.missing_slots[0] == "price"


CAR = "This tool belongs to the vehicle control system. Tool description: "
CAR_TOOLS = [
    _tool("fillFuelTank", CAR + "Fill the fuel tank of the vehicle.",
          {"fuelAmount": ("float", "The amount of fuel to fill in gallons.")}, ["fuelAmount"]),
    _tool("startEngine", CAR + "Start the engine of the vehicle.",
          {"ignitionMode": ("string", "The ignition mode of the vehicle. [Enum]: START, STOP")}, ["ignitionMode"]),
    _tool("activateParkingBrake", CAR + "Activate the parking brake of the vehicle.",
          {"mode": ("string", "The mode to set. [Enum]: engage, release")}, ["mode"]),
]


def test_each_step_of_a_request_of_several_adds_its_own_tool() -> None:
    request = ("My vehicle's fuel tank is low; please top it up. Following that, initiate the engine using "
               "ignition mode 'START' and make sure the parking brake is engaged.")
    assert rank_tools(request, tool_specs(CAR_TOOLS))[0][1].name != "fillFuelTank"
    assert derive_action_state([Turn(role="user", content=request)], CAR_TOOLS).missing_slots == ("fuelAmount",)
    # a clause whose best tool is no clearer than its second adds nothing
    assert missing_slots("Start the engine in START mode, then tell me about the vehicle.",
                         tool_specs(CAR_TOOLS)) == ()


def test_an_adverb_ends_the_open_reference() -> None:
    assert open_references("I'd like to snag some shares right now at the market price.") == ["shares"]


def test_a_synonym_of_a_tool_s_words_picks_the_tool() -> None:
    tools = [_tool("rmdir", FILES + "Remove a directory.", {"dir_name": ("string", "The directory to remove.")},
                   ["dir_name"]),
             _tool("delete_message", "Delete the latest message sent to a receiver.",
                   {"receiver_id": ("string", "User ID of the receiver.")}, ["receiver_id"])]
    specs = tool_specs(tools)
    assert rank_tools("Erase the empty directory, please.", specs)[0][1].name == "rmdir"  # erase ~ remove
    # "purchase" is "buy" in place_order's order type (Buy/Sell)
    assert rank_tools("I'd like to purchase a few of them.", tool_specs(TOOLS))[0][1].name == "place_order"


def test_an_enum_value_said_once_gives_one_parameter() -> None:
    codes = ("USD", "EUR", "GBP")
    params = (ParamSpec("base_currency", "The currency to convert from.", "string", codes),
              ParamSpec("target_currency", "The currency to convert to.", "string", codes))
    assert given_params(params, "Convert 1500 USD for me.") == {"base_currency"}
    assert given_params(params, "Convert 1500 USD to EUR.") == {"base_currency", "target_currency"}


TRAVEL = "This tool belongs to the travel system, which lets users book flights and manage cards. Tool description: "
TRAVEL_TOOLS = [
    _tool("get_flight_cost", TRAVEL + "Get the cost of a flight in USD based on location, date, and class.",
          {"travel_from": ("string", "The 3 letter code of the departing airport"),
           "travel_to": ("string", "The 3 letter code of the arriving airport"),
           "travel_date": ("string", "The date of the travel in the format 'YYYY-MM-DD'"),
           "travel_class": ("string", "The class of the travel. Options are: economy, business, first.")},
          ["travel_from", "travel_to", "travel_date", "travel_class"]),
    _tool("book_flight", TRAVEL + "Book a flight given the travel information.",
          {"access_token": ("string", "The access token obtained from the authenticate"),
           "card_id": ("string", "The ID of the credit card to use for the booking"),
           "travel_date": ("string", "The date of the travel in the format YYYY-MM-DD"),
           "travel_from": ("string", "The location the travel is from"),
           "travel_to": ("string", "The location the travel is to"),
           "travel_class": ("string", "The class of the travel")},
          ["access_token", "card_id", "travel_date", "travel_from", "travel_to", "travel_class"]),
]


def test_an_amount_named_by_that_much_or_some_named_thing_is_open() -> None:
    assert open_references("Can my car endure a stretch of that much miles without a stop?") == [
        "stretch", "miles", "stop"]
    # a name before the noun says whose shares; a price after "at" is the price's value, not the number of shares
    assert open_references("I've resolved to purchase some Tesla share at $700 per share.") == ["share"]
    assert open_references("Find a file named 'notes.txt'.") == []
    assert open_references("Make a backup copy for 'notes.txt'.") == []  # only a price's "at" / "per" / "each"
    messages = [{"role": "user", "content": "Show me my watchlist."}, _call("get_stock_info", symbol="TSLA"),
                {"role": "user", "content": "Having assessed the market, I've resolved to initiate a purchase of "
                                            "some Tesla share at $700 per share."}]
    assert derive_action_state(turns_from_messages(messages), TOOLS).missing_slots[0] == "amount"


def test_when_the_best_tools_lack_nothing_the_next_tool_gives_the_slots() -> None:
    request = ("A first-class ticket on Christmas from SFO to LAX would be a dream! I wonder how much the flight "
               "would cost. You know what, please book a first-class ticket from SFO to LAX on 2026-12-25.")
    specs = tool_specs(TRAVEL_TOOLS)
    assert rank_tools(request, specs)[0][1].name == "get_flight_cost"  # which the request gives in full
    assert derive_action_state([Turn(role="user", content=request)], TRAVEL_TOOLS).missing_slots == (
        "access_token", "card_id", "travel_class")  # book_flight's class lists no options: "first" is not read


def test_two_values_after_one_naming_word_go_to_the_two_parameters_it_names() -> None:
    tools = [_tool("verify_traveler_information", TRAVEL + "Verify the traveler information",
                   {"first_name": ("string", "The first name of the traveler"),
                    "last_name": ("string", "The last name of the traveler"),
                    "date_of_birth": ("string", "The date of birth of the traveler in the format YYYY-MM-DD"),
                    "passport_number": ("string", "The passport number of the traveler")},
                   ["first_name", "last_name", "date_of_birth", "passport_number"]), *TRAVEL_TOOLS]
    request = ("I'm off to see my family. Could you verify my traveler details for me? Just a quick rundown: my name "
               "is Theodore Collins.")
    assert given_params(tuple(tool_specs(tools)[0].params), request) == {"first_name", "last_name"}
    assert derive_action_state([Turn(role="user", content=request)], tools).missing_slots[:2] == (
        "date_of_birth", "passport_number")


def test_a_value_in_the_form_the_slot_s_description_spells_out_ranks_first(tmp_path: Path) -> None:
    from memory_ext.plan.slots import fits_format

    hint = "The 3 letter code of the arriving airport (string)"
    assert fits_format("to LAX", hint) is True and fits_format("to Los", hint) is False
    assert fits_format("2026-11-15", "The date of the travel in the format YYYY-MM-DD") is True
    assert fits_format("Rivermist", "The location the travel is to") is None  # no form spelled out
    follow_ups = ["My road trip is from Rivermist to San Francisco.", "oh it's to Los Angeles, sorry.",
                  "I'm planning to fly from San Francisco to Los Angeles", "my destination is to LAX",
                  "The file name is 'minutes.docx'.", "I want 100 shares."]
    messages = [{"role": "user", "content": "What does a flight from JFK cost on 2026-12-15 in business class?"},
                {"role": "user", "content": "Please find the flight cost from JFK on 2026-12-15 in business class."}]
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content=t, session_id=f"s{i}") for i, t in enumerate(follow_ups)], "u",
                         wait=True)
        state = derive_action_state(turns_from_messages(messages), TRAVEL_TOOLS)
        assert state.missing_slots == ("travel_to",)
        found = engine.search(messages[-1]["content"], "u", k=3, action_state=state)
        assert found.items[0].text == "my destination is to LAX", [i.text for i in found.items]


def test_a_short_answer_below_the_usual_pool_is_still_lifted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_ext.retrieval.slots as lift

    request = "Please book the flight from JFK on 2026-12-15 with my card 'id_1234' and token AB12, class 'economy'."
    words = "book flight from JFK card token please economy class my with the".split()
    chatter = [" ".join(words[:2 + i % 11]) + f" (note {i})." for i in range(90)]  # more or less like the request
    answer = "the travel is to LAX for me"
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content=t, session_id=f"s{i}") for i, t in enumerate([*chatter, answer])],
                         "u", wait=True)
        state = derive_action_state([Turn(role="user", content=request)], TRAVEL_TOOLS)
        assert state.missing_slots == ("travel_to",)

        def top3() -> list[str]:
            return [i.text for i in engine.search(request, "u", k=10, action_state=state).items][:3]

        assert answer not in [i.text for i in engine.search(request, "u", k=10).items]  # a plain search
        assert answer in top3()
        monkeypatch.setattr(lift, "SLOT_POOL_FACTOR", 1)
        assert answer not in top3()  # with the usual pool it ranks lower

"""The rule reader of the reference runtime: typing errors mended, values pulled out, intent named.

These drive `simrun.examples.tripdesk.reading` directly: `mend` (one typing error per word of 4+ letters),
`parse_date` (every date shape the runtime promises), and `read` (terse, wordy and mistyped
phrasing read the same).
"""

from __future__ import annotations

import datetime as dt

import pytest

from simrun.examples.tripdesk.reading import PartialDate, mend, parse_date, read, within_one_edit

# --- within_one_edit ----------------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ("rebook", "rebook"),      # identical
    ("rebook", "reobok"),      # swap of neighbours
    ("rebook", "rebok"),       # one letter dropped
    ("rebook", "rebbook"),     # one letter doubled
    ("rebook", "rebiok"),      # one letter changed
])
def test_within_one_edit_accepts_a_single_typing_error(a, b):
    assert within_one_edit(a, b) is True
    assert within_one_edit(b, a) is True


@pytest.mark.parametrize("a, b", [
    ("rebook", "rbeokk"),      # two errors
    ("rebook", "rebookkk"),    # two letters added
    ("rebook", "kooberr"),     # reversed
    ("outbound", "obtuound"),  # swap of letters that are not neighbours
    ("cancel", "cacnle"),      # two swaps
])
def test_within_one_edit_rejects_more_than_one_error(a, b):
    assert within_one_edit(a, b) is False


# --- mend ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("typed, meant", [
    # a swap of neighbouring letters
    ("rebokk", "rebook"), ("reobok", "rebook"), ("outbonud", "outbound"), ("cancle", "cancel"),
    ("remvoe", "remove"), ("lugagge", "luggage"), ("confrim", "confirm"), ("mrach", "march"),
    ("passprot", "passport"), ("retrun", "return"), ("flgiht", "flight"),
    # a dropped letter
    ("rebok", "rebook"), ("outbund", "outbound"), ("cancl", "cancel"), ("lugage", "luggage"),
    ("suitcse", "suitcase"), ("fligt", "flight"), ("anothr", "another"), ("plese", "please"),
    # a doubled letter
    ("rebbook", "rebook"), ("outtbound", "outbound"), ("cancell", "cancel"), ("baggs", "bags"),
    ("remmove", "remove"), ("passsport", "passport"),
    # a neighbouring key
    ("rebiok", "rebook"), ("outbpund", "outbound"), ("cancwl", "cancel"),
    ("rwturn", "return"), ("confirn", "confirm"), ("suitxase", "suitcase"), ("febryary", "february"),
])
def test_mend_undoes_one_typing_error(typed, meant):
    assert mend(typed) == meant


def test_mend_leaves_a_word_with_two_errors_alone():
    # "remivr" above: two neighbour-key errors in one word are not mended.
    assert mend("remivr") == "remivr"
    assert mend("rbeokk") == "rbeokk"


def test_mend_returns_the_vocabulary_word_for_a_capitalised_typo():
    assert mend("Rebok") == "rebook"
    assert mend("Outbund") == "outbound"


@pytest.mark.parametrize("word", [
    "rebook", "Outbound", "cancel", "luggage", "passport", "March",     # vocabulary words
    "same", "have", "with", "from", "them", "then", "there", "back",    # common words
    "Lisbon", "Porto", "Souza", "Summer",                               # names
])
def test_mend_keeps_correct_words(word):
    assert mend(word) == word


@pytest.mark.parametrize("word", ["teh", "bga", "adn", "k", ""])
def test_mend_leaves_words_shorter_than_four_letters(word):
    assert mend(word) == word


@pytest.mark.parametrize("word", ["rebo0k", "out-bund", "2027", "14th"])
def test_mend_leaves_words_that_are_not_all_letters(word):
    assert mend(word) == word


def test_mend_keeps_the_decline_word_nope():
    assert mend("nope") == "nope"
    assert read("Nope").decline is True


def test_mend_keeps_the_question_word_where():
    assert mend("where") == "where"
    r = read("Where does the trip go?")
    assert (r.intent, r.question) == ("question", "destination")


def test_mend_keeps_mean_and_a_clarifying_question_is_not_a_correction():
    assert mend("mean") == "mean"
    assert read("What do you mean?").correction is False


# --- parse_date ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("2027-03-14", PartialDate(14, 3, 2027)),
    ("14 March 2027", PartialDate(14, 3, 2027)),
    ("March 14, 2027", PartialDate(14, 3, 2027)),
    ("March 14 2027", PartialDate(14, 3, 2027)),
    ("14/03/2027", PartialDate(14, 3, 2027)),
    ("the 14th of March", PartialDate(14, 3, None)),
    ("14 March", PartialDate(14, 3, None)),
    ("March the 14th", PartialDate(14, 3, None)),
    ("Mar 14", PartialDate(14, 3, None)),
    ("14 mar. 2027", PartialDate(14, 3, 2027)),
    ("on the 3rd of june 2027", PartialDate(3, 6, 2027)),
    ("the 1st of December", PartialDate(1, 12, None)),
    ("move it to 2028-01-05 please", PartialDate(5, 1, 2028)),
    ("Please move the outbound to 14 March 2027.", PartialDate(14, 3, 2027)),
])
def test_parse_date_reads_every_promised_shape(text, expected):
    assert parse_date(text) == expected


def test_parse_date_reads_slashes_as_day_then_month():
    assert parse_date("03/04/2027") == PartialDate(3, 4, 2027)


@pytest.mark.parametrize("text", [
    "no date here", "rebook the outbound", "13/13/2027", "2027-13-01", "14 Smarch 2027", "",
])
def test_parse_date_returns_none_without_a_valid_date(text):
    assert parse_date(text) is None


def test_partial_date_keeps_its_own_year_and_fills_a_missing_one():
    assert PartialDate(14, 3, 2027).complete(2030) == dt.date(2027, 3, 14)
    assert PartialDate(14, 3, None).complete(2028) == dt.date(2028, 3, 14)


def test_partial_date_complete_is_none_for_an_impossible_day():
    assert PartialDate(31, 2, 2027).complete(2027) is None
    assert PartialDate(29, 2, None).complete(2027) is None
    assert PartialDate(29, 2, None).complete(2028) == dt.date(2028, 2, 29)


# --- read: intent, terse and wordy ----------------------------------------------------------------


@pytest.mark.parametrize("terse, wordy, intent", [
    ("add bag",
     "Hi there! Hope you are well. Could you please add one more bag to my trip? Thanks so much!",
     "add_bag"),
    ("remove bag",
     "Hello! Would you be so kind as to remove a bag from my trip, please? Thank you!",
     "remove_bag"),
    ("rebook outbound",
     "Hello! I hope you are having a lovely day. Could you please move my outbound flight? "
     "Thank you so much!",
     "rebook"),
    ("cancel trip",
     "Good morning! I'm afraid plans changed, so could you please cancel my trip? Many thanks!",
     "cancel_trip"),
    ("new trip",
     "Hi! I would love to plan a new trip for Ana Souza to Porto, if that's possible. Thanks!",
     "open_trip"),
])
def test_terse_and_wordy_phrasing_name_the_same_intent(terse, wordy, intent):
    assert read(terse).intent == intent
    assert read(wordy).intent == intent


def test_wordy_rebook_keeps_segment_and_date():
    r = read("Hello! I hope you are having a lovely day. Could you please move my outbound "
             "flight to the 14th of March? Thank you so much!")
    assert (r.intent, r.segment, r.date) == ("rebook", "outbound", PartialDate(14, 3, None))


@pytest.mark.parametrize("message, intent", [
    ("Rebok the outbund to 14 Mrach 2027", "rebook"),
    ("remvoe a bag", "remove_bag"),
    ("Plese add anothr bag", "add_bag"),
    ("add a bagg", "add_bag"),
    ("cancle the trip", "cancel_trip"),
    ("cancell my tripp", "cancel_trip"),
    ("reschedlue the retrun flight", "rebook"),
])
def test_mistyped_messages_are_mended_before_reading(message, intent):
    assert read(message).intent == intent


def test_mended_text_and_values_of_a_mistyped_rebook():
    r = read("Rebok the outbund to 14 Mrach 2027")
    assert r.text == "rebook the outbound to 14 march 2027"
    assert r.segment == "outbound"
    assert r.date == PartialDate(14, 3, 2027)


def test_mistyped_return_is_read_as_the_return_segment():
    r = read("please rebook the retrun to 20 March 2027")
    assert (r.intent, r.segment, r.date) == ("rebook", "return", PartialDate(20, 3, 2027))


@pytest.mark.parametrize("message, segment", [
    ("move my departure flight to 14 March", "outbound"),
    ("change the outgoing flight to 14 March", "outbound"),
    ("shift the inbound flight to 20 March", "return"),
])
def test_segment_synonyms(message, segment):
    r = read(message)
    assert (r.intent, r.segment) == ("rebook", segment)


@pytest.mark.parametrize("message, count", [
    ("add 2 bags", 2), ("add two bags", 2), ("add four more bags", 4), ("add an extra bag", 1),
    ("take two bags off", 2), ("add 3 extra suitcases", 3),
])
def test_bag_counts(message, count):
    assert read(message).count == count


def test_three_is_read_as_a_count():
    assert mend("three") == "three"
    assert read("add three bags").count == 3


def test_a_bag_message_without_a_number_has_no_count():
    assert read("add bag").count is None


def test_names_are_pulled_out_without_filler():
    assert read("Call it Summer fun").name == "Summer fun"
    assert read("Call it Summer fun").intent == "name_trip"
    assert read("rename the trip to Summer fun please").name == "Summer fun"
    assert read('Name it "Autumn retreat".').name == "Autumn retreat"


def test_traveler_and_destination_of_a_new_trip():
    r = read("open a new trip for Ana Souza to Porto")
    assert (r.intent, r.traveler, r.destination) == ("open_trip", "Ana Souza", "Porto")


@pytest.mark.parametrize("message, ordinal", [
    ("the first", 0), ("the second one", 1), ("third please", 2), ("the last one", -1),
])
def test_ordinals(message, ordinal):
    assert read(message).ordinal == ordinal


@pytest.mark.parametrize("message", ["yes", "Yes please", "go ahead", "ok", "I confirm", "sure",
                                     "yeah, do it"])
def test_confirmations(message):
    r = read(message)
    assert (r.confirm, r.decline, r.intent) == (True, False, None)


@pytest.mark.parametrize("message", ["no", "Keep as it is", "don't", "leave it", "no thanks"])
def test_declines(message):
    r = read(message)
    assert r.decline is True
    assert r.correction is False


@pytest.mark.parametrize("message", ["Sorry, I meant 14 March", "actually 14 March",
                                     "No, 14 March", "oops, make it 14 March"])
def test_corrections_are_flagged_and_keep_a_yearless_date(message):
    r = read(message)
    assert r.correction is True
    assert r.decline is False
    assert r.date == PartialDate(14, 3, None)


def test_complaints_are_flagged_without_an_intent():
    r = read("ugh this is taking forever")
    assert (r.complaint, r.intent) == (True, None)


def test_unreadable_message_has_no_intent():
    r = read("purple monkey dishwasher")
    assert r.intent is None
    assert r.question is None


# --- read: questions ------------------------------------------------------------------------------


@pytest.mark.parametrize("message, topic", [
    ("How many bags do I have?", "bags"),
    ("how many bgas?", "bags"),
    ("When is my outbound flight?", "date"),
    ("what date is the return?", "date"),
    ("What is the trip called?", "name"),
    ("Is the trip still open?", "status"),
    ("What's the status of my trip?", "status"),
    ("What is my passport number?", "refused"),
    ("Can you tell me the passport number on file?", "refused"),
    ("which document do I need?", "refused"),
    ("What's the weather like?", "other"),
])
def test_question_topics(message, topic):
    r = read(message)
    assert (r.intent, r.question) == ("question", topic)


def test_a_question_about_a_bag_is_not_a_bag_command():
    # "How many bags" names a bag word but asks; it must not add or remove anything.
    r = read("How many bags can I add?")
    assert r.intent == "question"
    assert r.question == "bags"

"""Long sentences (35-50 words, one phoneme piece each) on which the lookahead's head is encoded
first (engine/streaming/lookahead.py): the lookahead tests of both engines run them."""

from __future__ import annotations

LONG_SENTENCES = (
    "Our team will move every order from the north depot to the new site next week so please check that your "
    "delivery address and phone number are correct before friday because the courier cannot call you back after "
    "the van leaves and we would hate for anything to go missing.",
    "Your flight to Lisbon leaves tomorrow morning from gate twelve and I can move you to an aisle seat near the "
    "front if you would like me to do that for you before the check in desk closes at nine.",
    "I looked through your last three statements and the extra charge comes from the annual fee that was added in "
    "March when your introductory period ended so I can ask the billing team to waive it this one time if you want.",
    "The museum opens at ten in the morning and closes at six in the evening and tickets cost eighteen euros for "
    "adults while children under twelve enter for free on every day of the week except public holidays.",
    "To reset your router unplug it from the wall wait about thirty seconds plug it back in and then give the "
    "lights a minute or two to settle before you try connecting your laptop to the network again.",
)

"""Pairing, which rows of two models meet in a fit: `partners` resolves the pairing (one token
stream, the shuffle control's partners, or anchors on the text), checks that two tokenizers
behave alike and words the refusal; `anchors` is the char-anchor rule (pure): the anchors of two
tokenizations of one text, their coverage, and the check of the grouping windows."""

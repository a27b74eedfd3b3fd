"""The parameter server: tables of rows on servers, trainers that pull and push them (issue 30, SPEC section 11)."""

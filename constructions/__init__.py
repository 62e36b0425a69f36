"""The paper's explicit constructions as weights (imports theory/, never experiments/)."""

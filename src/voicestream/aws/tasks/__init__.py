"""Step Functions task logic: validate, benchmark and teardown (thin handlers live in functions/)."""

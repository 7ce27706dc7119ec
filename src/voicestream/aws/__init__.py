"""Everything that talks to AWS: the Step Functions tasks (`tasks/`), the deploy commands
(`deploy/`) and the one helper module they share (`clients`). Imports boto3: not for the
speech server or the browser page."""

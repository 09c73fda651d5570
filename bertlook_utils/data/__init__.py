"""data: the texts and labels the analyses run on: Wikipedia segments, silver parses, coreference, tasks."""

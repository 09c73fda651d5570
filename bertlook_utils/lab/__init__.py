"""lab: teaching: prose checked against the numbers, classroom sizes, the talk, the exercises."""

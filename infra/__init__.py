"""Running Trainyard: the process supervisor behind `trainyard up` and its parts."""

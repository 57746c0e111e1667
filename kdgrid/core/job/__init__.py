"""What a job shares before it trains: its data and teacher loaded once (loaded_job.py), each trial's set-up and check (trial_setup.py), the students' initialisation (init.py)."""

"""LAD (Lin, Chen & Kao, Sensors 2023): a learned gate over every teacher layer per student layer."""

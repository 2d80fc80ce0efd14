"""Operations: what the admin pages and the commands show an operator, read from the layers below.

The tool overview, try-it, usage reports, charts, the consent screen and the doctor. Only the Django face
(`admin`, `views`, `checks`, the management commands) imports it.
"""

"""The formats of the LMSs (Moodle, Canvas, Blackboard, Brightspace) as they are, importing
nothing of the course:

    downloads        the names and dates in an LMS's download of submissions
    phpcsv           CSV as PHP's fputcsv writes it (Moodle's grading worksheet, its exports)
    feedback_upload  the zip of an LMS's bulk feedback upload
"""
